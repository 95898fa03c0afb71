/* SPDX-License-Identifier: Apache-2.0
 * Compile-time checks of afm_bridge.h: the fixed-width types it promises. (A C target needs one source file.) */
#include "afm_bridge.h"

_Static_assert(sizeof(afm_bridge_status) == 4, "afm_bridge_status is int32_t");
_Static_assert(AFM_BRIDGE_ABI_MAJOR == 1, "this library implements interface 1.x");
