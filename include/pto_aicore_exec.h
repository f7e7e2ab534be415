/* The AICore executor in C (runtime/aicore-c/csrc/pto_aicore_exec.c): the legacy executor's
 * AICore program over the intrinsics of include/pto_aicore_intrinsics.h. */
#ifndef PTO_AICORE_EXEC_H
#define PTO_AICORE_EXEC_H

#include <stdint.h>

#include "pto_aicore_intrinsics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Run the legacy executor's AICore program on the calling core `ai` for the launch descriptor
 * at GM address `desc`: read the configuration, report, wait for the window, run every
 * dispatch until EXIT, and leave through the one exit path (trace close, store barrier,
 * EXITED, the teardown gate). Returns 0, or a negative status (-PTO_CORE_STATUS_NEG_*). */
int32_t pto_aicore_main(struct pto_ai *ai, uint64_t desc);

#ifdef __cplusplus
}
#endif

#endif /* PTO_AICORE_EXEC_H */
