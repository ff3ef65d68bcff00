-- SPDX-License-Identifier: MIT
-- scripts/check_commits.sh and the commit-msg hook (CONTRIBUTING.md,
-- Commits): in a scratch repository, a range of good commits passes and a
-- range holding a bad one fails naming each broken rule; the hook refuses a
-- bad message and lets a good one through; a base commit missing from the
-- history (a shallow clone) skips the check, saying so.
local S = require "support.sh"

local CHECK = S.SRC .. "/scripts/check_commits.sh"
local HOOK = S.SRC .. "/scripts/hooks/commit-msg"

if not S.have("git") then
  describe("check_commits.sh", function()
    pending("git is not installed")
  end)
  return
end

-- A scratch repository whose commits have the given messages, in order.
local function scratch(messages)
  local dir = S.tmpdir()
  local git = "git -C " .. S.q(dir) .. " -c user.name=t -c user.email=t@example.org -c core.hooksPath=/dev/null "
  assert(S.sh(git .. "init -q") == 0)
  for i, msg in ipairs(messages) do
    S.writefile(dir .. "/f", tostring(i))
    S.writefile(dir .. "/msg", msg)
    local rc, out = S.sh(git .. "add f && " .. git .. "commit -q --cleanup=verbatim -F " .. S.q(dir .. "/msg"))
    assert(rc == 0, out)
  end
  return dir
end

local function check(dir, args)
  return S.sh("cd " .. S.q(dir) .. " && " .. S.q(CHECK) .. " " .. args)
end

local GOOD = "Add the first file\n\nIt holds 1, because the spec needs one.\n"

describe("scripts/check_commits.sh", function()
  it("passes a range of messages in the style", function()
    local dir = scratch({ GOOD, "core: move the reader into io\n", "Embed the seed\n\nWhy: 3 places.\n" })
    local rc, out = check(dir, "HEAD~2..HEAD")
    S.rmtree(dir)
    assert.are.equal(0, rc, out)
    assert.matches("2 commit%(s%) of HEAD~2..HEAD follow the style", out)
  end)

  it("fails a range holding a bad message, naming each broken rule", function()
    local long = "Make " .. ("the subject long "):rep(5)
    local dir = scratch({ GOOD, "Added a file.\nno blank line\n", long .. "\n", "Review mends\n",
      "bench: adding numbers\n", "WIP\n" })
    local rc, out = check(dir, "HEAD~5..HEAD")
    S.rmtree(dir)
    assert.are.equal(1, rc, out)
    assert.matches("the subject ends with a period", out)
    assert.matches("the second line is not blank", out)
    assert.matches('starts with "added"', out)
    assert.matches('starts with "adding"', out)
    assert.matches("the subject has " .. #long .. " characters", out)
    assert.matches("placeholder", out)
    assert.matches("7 problem%(s%) in 5 commit%(s%)", out)
  end)

  it("checks since the commit named in a base file, and skips when it is missing", function()
    local dir = scratch({ "Initial commit, long ago, in the old style of long subjects that say much.\n", GOOD })
    S.writefile(dir .. "/base", "0123456789abcdef0123456789abcdef01234567\n# a comment\n")
    local rc, out = check(dir, "--base-file base")
    assert.are.equal(0, rc, out)
    assert.matches("skipped: base commit 0123456789abcdef0123456789abcdef01234567", out)
    local _, first = S.sh("git -C " .. S.q(dir) .. " rev-list --max-parents=0 HEAD")
    S.writefile(dir .. "/base", first)
    rc, out = check(dir, "--base-file base")
    S.rmtree(dir)
    assert.are.equal(0, rc, out)
    assert.matches("1 commit%(s%) of %x+..HEAD follow the style", out)
  end)
end)

describe("scripts/hooks/commit-msg", function()
  it("refuses a bad message and accepts a good one, ignoring git's comments", function()
    local dir = S.tmpdir()
    local msg = dir .. "/COMMIT_EDITMSG"
    S.writefile(msg, "Fixed the tests.\n# Please enter the commit message\n")
    local rc, out = S.sh(S.q(HOOK) .. " " .. S.q(msg))
    assert.are.equal(1, rc, out)
    assert.matches("the subject ends with a period", out)
    assert.matches('starts with "fixed"', out)
    S.writefile(msg, "# Please enter the commit message\n\nFix the tests\n\nThey read a removed file (2 of 40).\n")
    rc, out = S.sh(S.q(HOOK) .. " " .. S.q(msg))
    S.rmtree(dir)
    assert.are.equal(0, rc, out)
  end)
end)
