#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
// hiredis' blocking API. redisCommand is variadic; the Swift side uses only
// redisCommandArgv / redisAppendCommandArgv, which take arrays and are binary safe.
#include <hiredis/hiredis.h>
#include <sys/time.h>
#endif
