/* replay_main.c — runs a fuzz target over files, without libFuzzer.
 *
 * Linked with a target built by the ordinary compiler (and with SAN=1 its
 * sanitizers), so `make test` replays tests/fuzz/regressions/<target>/ and
 * the seed corpus through the same LLVMFuzzerTestOneInput the fuzzer runs
 * (tests/e2e/fuzz_replay.sh). Each argument is a file or a directory of
 * files; prints how many inputs ran. A finding aborts, as under the fuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            continue;
        if (!S_ISDIR(st.st_mode)) {
            count += replay_file(argv[i]) == 0;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            char path[4096];
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            count += replay_file(path) == 0;
        }
        if (d)
            closedir(d);
    }
    printf("%ld inputs replayed\n", count);
    return 0;
}
