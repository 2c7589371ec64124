// The peer for cache hits: a plain C loop of mdb_get + memcpy over the same
// LMDB environment that LMDBCacheStore wrote (keys "k" + "k<index>").
// Usage: mdb_get_loop DIR COUNT GETS  -> prints ns per get as JSON.
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: mdb_get_loop DIR COUNT GETS\n"); return 2; }
    int count = atoi(argv[2]), gets = atoi(argv[3]);
    MDB_env *env; MDB_txn *txn; MDB_dbi dbi;
    if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4) || mdb_env_set_mapsize(env, 4UL << 30) ||
        mdb_env_open(env, argv[1], MDB_NOTLS | MDB_RDONLY, 0600)) { fprintf(stderr, "open failed\n"); return 1; }
    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (mdb_dbi_open(txn, "entries", 0, &dbi)) { fprintf(stderr, "no entries db\n"); return 1; }
    mdb_txn_commit(txn);  // an aborted transaction would close the handle it opened
    int *keys = malloc(sizeof(int) * gets);
    srand(42);
    for (int i = 0; i < gets; i++) keys[i] = rand() % count;
    char *buffer = malloc(64 << 20);
    size_t total = 0;
    char key[32];
    struct timespec a, b;
    for (int pass = 0; pass < 2; pass++) {  // pass 0 warms
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < (pass ? gets : 1000); i++) {
            int n = snprintf(key, sizeof key, "kk%d", keys[i % gets]);
            MDB_val k = {n, key}, v;
            // One read transaction per get, as the store does.
            mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
            if (mdb_get(txn, dbi, &k, &v) == 0) { memcpy(buffer, v.mv_data, v.mv_size); total += v.mv_size; }
            mdb_txn_abort(txn);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
    }
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / gets;
    if (total == 0) { fprintf(stderr, "mdb_get found nothing: wrong keys or database\n"); return 1; }
    printf("{\"scenario\": \"mdb_get loop\", \"nsPerGet\": %.1f, \"bytes\": %zu}\n", ns, total);
    return 0;
}
