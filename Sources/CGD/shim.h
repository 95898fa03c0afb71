// SPDX-License-Identifier: Apache-2.0
// libgd from Debian's libgd-dev (decodes PNG, JPEG, WebP and GIF; encodes JPEG and PNG). Imported only by
// AFMImageCodec.
#ifndef AFM_CGD_SHIM_H
#define AFM_CGD_SHIM_H
#include <gd.h>

/// gdImageSX/SY and gdImageTrueColor are macros.
static inline int afm_gd_width(gdImagePtr image) { return gdImageSX(image); }
static inline int afm_gd_height(gdImagePtr image) { return gdImageSY(image); }
static inline int afm_gd_is_true_color(gdImagePtr image) { return gdImageTrueColor(image); }
#endif
