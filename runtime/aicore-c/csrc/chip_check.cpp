// The chip backend's type check (build.rs): the executor compiled as C++ over
// include/pto_aicore_chip.h, against chip_stub/pto_vendor_stub.h instead of the vendor's header.
// Compiled on every build, never linked.
#define PTO_AICORE_CHIP 1
#define PTO_AICORE_CHIP_STUB 1
#include "pto_aicore_exec.c"
