// nop (tests): does nothing (the AIC of a MIX task whose AIV lanes are under test).
#include "pto_kernel.h"

PTO_KERNEL void kernel_entry(int64_t *args) { (void)args; }
