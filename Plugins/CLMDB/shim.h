#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H
// LMDB's API has no variadics; the shim only gathers the header so that the
// system library target has one place to point at.
#include <lmdb.h>
#endif
