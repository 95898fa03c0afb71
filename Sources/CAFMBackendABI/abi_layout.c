// SPDX-License-Identifier: Apache-2.0
// Compile-time checks that the ABI 1.0 layout constants in afm_backend.h match the structs.
#include "afm_backend.h"
#include <stddef.h>

_Static_assert(sizeof(afm_backend_info) == AFM_BACKEND_INFO_SIZE_1_0, "afm_backend_info 1.0 size changed");
_Static_assert(sizeof(afm_backend_vtable) == AFM_BACKEND_VTABLE_SIZE_1_0, "afm_backend_vtable 1.0 size changed");
_Static_assert(sizeof(afm_event) == AFM_EVENT_SIZE_1_0, "afm_event 1.0 size changed");
_Static_assert(offsetof(afm_event, struct_size) == 0, "struct_size must come first");
