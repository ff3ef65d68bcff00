#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks commit messages against the style in CONTRIBUTING.md ("Commits"):
#
#   scripts/check_commits.sh [RANGE]         the commits in RANGE (git log's
#                                            syntax, e.g. main..HEAD); default:
#                                            origin/main..HEAD if origin/main
#                                            exists, else HEAD~20..HEAD
#   scripts/check_commits.sh --base-file F   the commits since the commit named
#                                            in F (scripts/commits_base: the lint
#                                            suite); skips, saying so, when that
#                                            commit is not in the history (a
#                                            shallow clone)
#   scripts/check_commits.sh --message F     one message file (scripts/hooks/
#                                            commit-msg; lines starting with '#'
#                                            are git's comments and are dropped)
#
# The rules, for each message:
#   - the subject (first line) is not empty and shorter than 72 characters
#   - the subject does not end with a period
#   - the subject is in the imperative, by heuristics: its first word (after
#     an optional "area:" prefix) does not end in -ed or -ing (unless it is a
#     verb such as "embed" or "bring"), and it is not "WIP", "fixup!",
#     "squash!" or "Review mends"
#   - a body, if any, is separated from the subject by a blank line
# Merge commits are passed over.  Prints one line per problem, naming the
# commit; exits 1 if there was any, else 0.
set -uo pipefail

# Verbs whose imperative ends in -ed or -ing.
allowed_words=" embed feed seed speed need proceed exceed succeed shed breed bleed heed bed
  bring string ping ring sing swing wing sting cling fling spring wring "

problems=0

# check_message WHERE: reads one message on stdin, reports what breaks a rule.
check_message() {
  local where=$1 subject second word lower
  IFS= read -r subject || true
  IFS= read -r second || second=""
  report() {
    echo "$where: $1"
    echo "    subject: $subject"
    problems=$((problems + 1))
  }
  if [[ -z "${subject//[[:space:]]/}" ]]; then
    report "the subject is empty"
    return
  fi
  ((${#subject} < 72)) || report "the subject has ${#subject} characters (write fewer than 72; details go in the body)"
  [[ "$subject" != *. ]] || report "the subject ends with a period"
  [[ -z "$second" ]] || report "the second line is not blank (a blank line separates the subject from the body)"
  lower=${subject,,}
  case "$lower" in
    wip | wip[^a-z]* | fixup!* | squash!* | "review mends"*)
      report "the subject is a placeholder (WIP, fixup!, squash!, review mends): say what the change does"
      return
      ;;
  esac
  # The first word after an optional "area:" prefix ("Binding: add ...").
  word=${subject#*: }
  [[ "$word" != "$subject" && "${subject%%: *}" != *" "* ]] || word=$subject
  word=${word%% *}
  word=${word,,}
  word=${word//[^a-z]/}
  if [[ "$word" == *ed || "$word" == *ing ]] && [[ "$allowed_words" != *" $word "* ]]; then
    report "the subject starts with \"$word\": write it in the imperative (\"Add\", not \"Added\" or \"Adding\")"
  fi
}

# strip_comments: git's template lines and everything below a scissors line.
strip_comments() {
  awk '/^# -+ >8 -+$/ { exit } /^#/ { next } { print }' | sed '/./,$!d'
}

case "${1:-}" in
  --message)
    [[ -f "${2:-}" ]] || { echo "check_commits: --message needs a message file" >&2; exit 2; }
    check_message "commit message" < <(strip_comments <"$2")
    if ((problems)); then
      echo "check_commits: $problems problem(s); the style is in CONTRIBUTING.md (Commits)"
      exit 1
    fi
    exit 0
    ;;
  --base-file)
    [[ -f "${2:-}" ]] || { echo "check_commits: --base-file needs a file naming a commit" >&2; exit 2; }
    base=$(sed -n '/^[0-9a-f]/{s/[^0-9a-f].*//;p;q}' "$2")
    if [[ -z "$base" ]] || ! git cat-file -e "$base^{commit}" 2>/dev/null; then
      echo "check_commits: skipped: base commit ${base:-?} (from $2) is not in this history (shallow clone?)"
      exit 0
    fi
    range="$base..HEAD"
    ;;
  -h | --help)
    sed -n '3,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
    exit 0
    ;;
  "")
    if git rev-parse -q --verify origin/main >/dev/null; then
      range="origin/main..HEAD"
    elif git rev-parse -q --verify HEAD~20 >/dev/null; then
      range="HEAD~20..HEAD"
    else
      range="HEAD"
    fi
    ;;
  *)
    range=$1
    ;;
esac

commits=$(git rev-list --no-merges "$range") || { echo "check_commits: git cannot read range $range" >&2; exit 2; }
count=0
for c in $commits; do
  count=$((count + 1))
  check_message "$(git log -1 --format=%h "$c")" < <(git log -1 --format=%B "$c")
done
if ((problems)); then
  echo "check_commits: $problems problem(s) in $count commit(s) of $range; the style is in CONTRIBUTING.md (Commits)"
  exit 1
fi
echo "check_commits: $count commit(s) of $range follow the style"
