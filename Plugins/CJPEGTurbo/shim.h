#ifndef CJPEGTURBO_SHIM_H
#define CJPEGTURBO_SHIM_H
// libjpeg-turbo's libjpeg API, for its constants (J_COLOR_SPACE) in Swift. Every
// call into it is made from C, inside a setjmp: the CJPEGTurboOps target.
#include <stdio.h>
#include <jpeglib.h>
#endif
