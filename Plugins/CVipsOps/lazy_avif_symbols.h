// The libavif functions the package calls (avif_ops.c, lazy_vips.c), one per
// line, for lazy_vips.S (see Sources/CWebImageSystem/include/CWILazyLibrary.h).
// Functions only.
//
// A call to a function missing here fails the link with "undefined symbol":
// add the name.
LAZY(avifDecoderCreate)
LAZY(avifDecoderDestroy)
LAZY(avifDecoderNextImage)
LAZY(avifDecoderNthImageTiming)
LAZY(avifDecoderParse)
LAZY(avifDecoderSetIOMemory)
LAZY(avifEncoderAddImage)
LAZY(avifEncoderCreate)
LAZY(avifEncoderDestroy)
LAZY(avifEncoderFinish)
LAZY(avifImageCreate)
LAZY(avifImageDestroy)
LAZY(avifImageRGBToYUV)
LAZY(avifImageYUVToRGB)
LAZY(avifRGBImageAllocatePixels)
LAZY(avifRGBImageFreePixels)
LAZY(avifRGBImageSetDefaults)
LAZY(avifRWDataFree)
LAZY(avifResultToString)
LAZY(avifVersion)
