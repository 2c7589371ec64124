// The direct thumbnail path's colour conversion (see include/CJPEGTurboOps.h,
// part 3): an embedded ICC profile to sRGB through lcms2, the library libvips'
// icc_transform calls, with the same intent (relative colorimetric) and depth.
#include "CJPEGTurboOps.h"
#include <lcms2.h>

void *CJT_icc_to_srgb(const unsigned char *profile, size_t length) {
    if (!profile || length < 128 || length > 0x7fffffff) return NULL;
    cmsHPROFILE input = cmsOpenProfileFromMem(profile, (cmsUInt32Number) length);
    if (!input) return NULL;
    cmsHTRANSFORM transform = NULL;
    // An RGB input profile only; anything else goes to libvips, which decides
    // whether it applies (its vips_icc_is_compatible_profile).
    if (cmsGetColorSpace(input) == cmsSigRgbData && cmsGetDeviceClass(input) != cmsSigLinkClass) {
        cmsHPROFILE output = cmsCreate_sRGBProfile();
        if (output) {
            // NOCACHE: cmsDoTransform then keeps no state, so threads can share it.
            transform = cmsCreateTransform(input, TYPE_RGB_8, output, TYPE_RGB_8, INTENT_RELATIVE_COLORIMETRIC, cmsFLAGS_NOCACHE);
            cmsCloseProfile(output);
        }
    }
    cmsCloseProfile(input);
    return transform;
}

void CJT_icc_apply(void *transform, const unsigned char *in, unsigned char *out, size_t pixels) {
    while (pixels > 0) {
        cmsUInt32Number chunk = pixels > 0x1000000 ? 0x1000000 : (cmsUInt32Number) pixels;
        cmsDoTransform((cmsHTRANSFORM) transform, in, out, chunk);
        in += (size_t) chunk * 3;
        out += (size_t) chunk * 3;
        pixels -= chunk;
    }
}

void CJT_icc_free(void *transform) {
    if (transform) cmsDeleteTransform((cmsHTRANSFORM) transform);
}
