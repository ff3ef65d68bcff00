/* SPDX-License-Identifier: MIT */
/* The op table: attn's elementwise ops, each declared once.
 *
 * Each list below is an X-macro: a file that needs something of every op
 * defines X to pick the fields it wants and expands the list.  From these
 * lines come
 *  - the op enums attn_unary_op and attn_binary_op (attn.h),
 *  - each op's name in messages and torch's name for its backward node,
 *    what the backward reads and what integer and bool inputs give (core),
 *  - the kernels' dispatch tables: an op's rows are named after it,
 *    row_NAME and drow_NAME (core/kernels/elementwise_kernels.h),
 *  - the Lua functions attn.NAME and methods t:NAME / t:NAME_ with their
 *    argument parsing (binding),
 *  - attn._ops, the table Lua sees, from which the reference docs and the
 *    generic op test (spec/op_table_spec.lua, with torch's values from
 *    scripts/fixtures/gen_op_table.py) are made.
 * Entries are only ever appended: the enum values are the C ABI.
 *
 * Unary fields: X(ID, name, sig, reads, ints, lo, hi, node, torch, doc)
 *   ID     enum suffix: ATTN_ID
 *   name   C and Lua name (rows row_name, drow_name; messages)
 *   sig    the Lua call, "" when only another op's option reaches it
 *   reads  what the backward reads: NONE, IN (the input), OUT (the output)
 *   ints   int64 and bool inputs: FLOAT (computed as float32), KEEP (int64
 *          stays int64, bool refused), KEEP_BOOL (bool stays bool too),
 *          BOOL_TO_INT (bool becomes int64), REFUSE (floating only)
 *   lo hi  where the op is smooth: the generic test samples inputs there
 *   node   torch's grad_fn name
 *   torch  the torch function it mirrors
 *   doc    one line for the reference
 */
#ifndef ATTN_OPS_H
#define ATTN_OPS_H

/* The values of the reads, ints and kind fields as numbers, for code that
   expands the lists (ATTN_OP_READS_##READS). */
enum { ATTN_OP_READS_NONE, ATTN_OP_READS_IN, ATTN_OP_READS_OUT };
enum { ATTN_OP_INTS_FLOAT, ATTN_OP_INTS_KEEP, ATTN_OP_INTS_KEEP_BOOL, ATTN_OP_INTS_BOOL_TO_INT, ATTN_OP_INTS_REFUSE };
enum { ATTN_OP_KIND_ARITH, ATTN_OP_KIND_COMPARE };

/* clang-format off */
#define ATTN_UNARY_OPS(X)                                                                                              \
  X(NEG, neg, "t:neg()", NONE, KEEP, -2, 2, NegBackward0, "torch.neg", "Elementwise -t (also `-t`).")                  \
  X(EXP, exp, "t:exp()", OUT, FLOAT, -2, 2, ExpBackward0, "torch.exp", "Elementwise e^t.")                             \
  X(LOG, log, "t:log()", IN, FLOAT, 0.2, 3, LogBackward0, "torch.log", "Elementwise natural logarithm.")               \
  X(SQRT, sqrt, "t:sqrt()", OUT, FLOAT, 0.2, 3, SqrtBackward0, "torch.sqrt", "Elementwise square root.")               \
  X(RSQRT, rsqrt, "t:rsqrt()", OUT, FLOAT, 0.2, 3, RsqrtBackward0, "torch.rsqrt", "Elementwise 1 / sqrt(t).")          \
  X(TANH, tanh, "t:tanh()", OUT, FLOAT, -2, 2, TanhBackward0, "torch.tanh", "Elementwise hyperbolic tangent.")         \
  X(SIGMOID, sigmoid, "t:sigmoid()", OUT, FLOAT, -3, 3, SigmoidBackward0, "torch.sigmoid",                             \
    "Elementwise 1 / (1 + e^-t).")                                                                                     \
  X(RELU, relu, "t:relu()", OUT, KEEP, -2, 2, ReluBackward0, "torch.relu", "Elementwise max(t, 0).")                   \
  X(GELU, gelu, "t:gelu(approximate: \"none\"|\"tanh\" = \"none\")", IN, REFUSE, -3, 3, GeluBackward0,                 \
    "torch.nn.functional.gelu", "Gaussian error linear unit, exact (erf) or with the tanh approximation.")             \
  X(GELU_TANH, gelu_tanh, "", IN, REFUSE, -3, 3, GeluBackward0, "torch.nn.functional.gelu",                            \
    "gelu with approximate = \"tanh\".")                                                                               \
  X(ABS, abs, "t:abs()", IN, KEEP, -2, 2, AbsBackward0, "torch.abs", "Elementwise absolute value.")                    \
  X(SIN, sin, "t:sin()", IN, FLOAT, -3, 3, SinBackward0, "torch.sin", "Elementwise sine.")                             \
  X(COS, cos, "t:cos()", IN, FLOAT, -3, 3, CosBackward0, "torch.cos", "Elementwise cosine.")                           \
  X(SIGN, sign, "t:sign()", NONE, KEEP_BOOL, -2, 2, SignBackward0, "torch.sign", "Elementwise -1, 0 or 1.")            \
  X(RECIPROCAL, reciprocal, "t:reciprocal()", OUT, FLOAT, 0.5, 2, ReciprocalBackward0, "torch.reciprocal",             \
    "Elementwise 1 / t.")                                                                                              \
  X(SQUARE, square, "t:square()", IN, BOOL_TO_INT, -2, 2, PowBackward0, "torch.square", "Elementwise t * t.")          \
  X(LOG1P, log1p, "t:log1p()", IN, FLOAT, -0.5, 2, Log1PBackward0, "torch.log1p",                                      \
    "Elementwise log(1 + t), exact near 0.")                                                                           \
  X(EXPM1, expm1, "t:expm1()", OUT, FLOAT, -2, 2, Expm1Backward0, "torch.expm1", "Elementwise e^t - 1, exact near 0.") \
  X(FLOOR, floor, "t:floor()", NONE, KEEP, -3, 3, FloorBackward0, "torch.floor", "Elementwise round down.")            \
  X(CEIL, ceil, "t:ceil()", NONE, KEEP, -3, 3, CeilBackward0, "torch.ceil", "Elementwise round up.")                   \
  X(ROUND, round, "t:round()", NONE, KEEP, -3, 3, RoundBackward0, "torch.round", "Elementwise round half to even.")    \
  X(SILU, silu, "t:silu()", IN, REFUSE, -3, 3, SiluBackward0, "torch.nn.functional.silu", "Elementwise t * sigmoid(t).") \
  X(ERF, erf, "t:erf()", IN, FLOAT, -2, 2, ErfBackward0, "torch.erf", "Elementwise the error function.")               \
  X(TAN, tan, "t:tan()", OUT, FLOAT, -1, 1, TanBackward0, "torch.tan", "Elementwise tangent.")

/* Binary fields: X(ID, name, sig, kind, ints, lo, hi, node, torch, doc)
 *   sig    the Lua call (also t:NAME(b) and t:NAME_(b))
 *   kind   ARITH (differentiable: node names its backward) or COMPARE (a
 *          bool result, node NONE)
 *   ints   int64 and bool inputs: KEEP (exact integer arithmetic) or FLOAT
 *   lo hi  the generic test samples both operands there
 * Every binary op is t:NAME(other), attn.NAME(a, b) and t:NAME_(other);
 * either side may be a number. */
#define ATTN_BINARY_OPS(X)                                                                                             \
  X(ADD, add, "attn.add(a, b, alpha: number = 1)", ARITH, KEEP, -2, 2, AddBackward0, "torch.add", "a + alpha * b (`t + b`; alpha defaults to 1).") \
  X(SUB, sub, "attn.sub(a, b, alpha: number = 1)", ARITH, KEEP, -2, 2, SubBackward0, "torch.sub", "a - alpha * b (`t - b`; alpha defaults to 1).") \
  X(MUL, mul, "attn.mul(a, b)", ARITH, KEEP, -2, 2, MulBackward0, "torch.mul", "Elementwise a * b (`t * b`).")         \
  X(DIV, div, "attn.div(a, b)", ARITH, FLOAT, 0.5, 2, DivBackward0, "torch.div", "Elementwise true division a / b (`t / b`).") \
  X(POW, pow, "attn.pow(a, b)", ARITH, KEEP, 0.5, 2, PowBackward1, "torch.pow", "Elementwise a ^ b (`t ^ b`).")        \
  X(EQ, eq, "attn.eq(a, b)", COMPARE, KEEP, -2, 2, NONE, "torch.eq", "Elementwise a == b, a bool tensor.")             \
  X(NE, ne, "attn.ne(a, b)", COMPARE, KEEP, -2, 2, NONE, "torch.ne", "Elementwise a ~= b, a bool tensor.")             \
  X(LT, lt, "attn.lt(a, b)", COMPARE, KEEP, -2, 2, NONE, "torch.lt", "Elementwise a < b, a bool tensor.")              \
  X(LE, le, "attn.le(a, b)", COMPARE, KEEP, -2, 2, NONE, "torch.le", "Elementwise a <= b, a bool tensor.")             \
  X(GT, gt, "attn.gt(a, b)", COMPARE, KEEP, -2, 2, NONE, "torch.gt", "Elementwise a > b, a bool tensor.")              \
  X(GE, ge, "attn.ge(a, b)", COMPARE, KEEP, -2, 2, NONE, "torch.ge", "Elementwise a >= b, a bool tensor.")             \
  X(MAXIMUM, maximum, "attn.maximum(a, b)", ARITH, KEEP, -2, 2, MaximumBackward0, "torch.maximum",                     \
    "Elementwise the larger of a and b (NaN if either is NaN).")                                                       \
  X(MINIMUM, minimum, "attn.minimum(a, b)", ARITH, KEEP, -2, 2, MinimumBackward0, "torch.minimum",                     \
    "Elementwise the smaller of a and b (NaN if either is NaN).")                                                      \
  X(ATAN2, atan2, "attn.atan2(a, b)", ARITH, FLOAT, 0.5, 2, Atan2Backward0, "torch.atan2", "Elementwise atan(a / b) in the quadrant of (b, a).") \
  X(FMOD, fmod, "attn.fmod(a, b)", ARITH, KEEP, 0.5, 2, FmodBackward1, "torch.fmod",                                   \
    "Elementwise the remainder of a / b with a's sign (C fmod).")
/* clang-format on */

#endif
