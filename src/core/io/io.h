/* SPDX-License-Identifier: MIT */
/* Weight files and printing (1.5, src/core/io/): .npy/.npz, safetensors,
 * torch's .pt zip container (io_torch.c; its pickle is lua/attn/ptfile.lua),
 * attn's own format (io.c) and attn_print.  Their entry points are
 * attn.h's; what the readers and writers share stays in the room
 * (io_internal.h).  Not installed. */
#ifndef ATTN_CORE_IO_H
#define ATTN_CORE_IO_H

#include "ops/ops.h"

#endif
