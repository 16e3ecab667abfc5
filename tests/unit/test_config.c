/* test_config.c — configuration parsing and validation (daemon/config.c).
 *
 * Each key's layer order (defaults < file < flags), its type and range
 * checks, and that every refusal names the key it is about, since that is
 * what an administrator reading a failed start needs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/config.h"
#include "spmv.h"

static char errbuf[512];

static int apply(spmvd_config *c, const char *json)
{
    return config_apply_json(c, json, strlen(json), "test", errbuf, sizeof errbuf);
}

static void test_defaults(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_string_equal(c.default_dtype, "float64");
    assert_string_equal(c.devices, "all");
    assert_int_equal(c.default_hack_size, 32);
    assert_null(c.auth_token_file);
    assert_null(c.tls_cert);
    assert_true(c.queue_depth >= 1);
    assert_int_equal(c.serial_below, SPMV_SERIAL_BELOW_DEFAULT);
    assert_int_equal(c.cluster_pulse_ms, 200);
    assert_string_equal(c.cluster_pulse_addr, "auto");
    assert_int_equal(c.cluster_local_liveness, 1);
    assert_int_equal(config_validate(&c, errbuf, sizeof errbuf), 0);
    config_free(&c);
}

static void test_file_keys(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_int_equal(apply(&c, "{\"listen\":\"[::1]:9000\",\"threads\":8,\"queue_depth\":1,"
                               "\"devices\":[0,2],\"log_level\":\"debug\",\"tls_cert\":null,"
                               "\"max_upload_bytes\":1048576,\"serial_below\":0}"), 0);
    assert_string_equal(c.listen, "[::1]:9000");
    assert_int_equal(c.threads, 8);
    assert_int_equal(c.queue_depth, 1);
    assert_string_equal(c.devices, "0,2");
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(c.max_upload_bytes, 1048576);
    assert_int_equal(c.serial_below, 0);
    config_free(&c);
}

/* Every refusal carries the key's name. */
static void expect_refused(const char *json, const char *key)
{
    spmvd_config c;
    config_defaults(&c);
    errbuf[0] = '\0';
    assert_int_equal(apply(&c, json), -1);
    if (!strstr(errbuf, key))
        fail_msg("message \"%s\" does not name `%s`", errbuf, key);
    config_free(&c);
}

/* default_dtype takes the upload dtypes, "mixed" among them. */
static void test_default_dtype_mixed(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_int_equal(apply(&c, "{\"default_dtype\":\"mixed\"}"), 0);
    assert_string_equal(c.default_dtype, "mixed");
    config_free(&c);
}

static void test_refusals_name_the_key(void **state)
{
    (void)state;
    expect_refused("{\"threads\":\"eight\"}", "threads");
    expect_refused("{\"threads\":0}", "threads");
    expect_refused("{\"threads\":100000}", "threads");
    expect_refused("{\"queue_depth\":-1}", "queue_depth");
    expect_refused("{\"max_upload_bytes\":1.5}", "max_upload_bytes");
    expect_refused("{\"listen\":\"localhost\"}", "listen");
    expect_refused("{\"listen\":\"127.0.0.1:99999\"}", "listen");
    expect_refused("{\"listen\":42}", "listen");
    expect_refused("{\"devices\":\"0,0\"}", "devices");
    expect_refused("{\"devices\":\"first\"}", "devices");
    expect_refused("{\"devices\":[]}", "devices");
    expect_refused("{\"default_dtype\":\"int8\"}", "default_dtype");
    expect_refused("{\"default_dtype\":\"mixed32\"}", "default_dtype");
    expect_refused("{\"log_level\":\"loud\"}", "log_level");
    expect_refused("{\"state_dir\":\"\"}", "state_dir");
    expect_refused("{\"state_dir\":null}", "state_dir");
    expect_refused("{\"no_such_key\":1}", "no_such_key");
    expect_refused("{\"default_hack_size\":4096}", "default_hack_size");
    expect_refused("{\"serial_below\":-1}", "serial_below");
    expect_refused("{\"serial_below\":\"small\"}", "serial_below");
    expect_refused("{\"cluster_pulse_ms\":-1}", "cluster_pulse_ms");
    expect_refused("{\"cluster_pulse_ms\":60001}", "cluster_pulse_ms");
    expect_refused("{\"cluster_pulse_addr\":\"rank0.example\"}", "cluster_pulse_addr");
    expect_refused("{\"cluster_pulse_addr\":\"10.0.0.256\"}", "cluster_pulse_addr");
    expect_refused("{\"cluster_local_liveness\":0}", "cluster_local_liveness");
}

/* The pulse's keys (docs/cluster.md): a period (0: off), an IPv4 address
 * or auto, the /proc switch. */
static void test_pulse_keys(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_int_equal(apply(&c, "{\"cluster_pulse_ms\": 0, \"cluster_pulse_addr\": \"10.1.2.3\", "
                               "\"cluster_local_liveness\": false}"), 0);
    assert_int_equal(c.cluster_pulse_ms, 0);
    assert_string_equal(c.cluster_pulse_addr, "10.1.2.3");
    assert_int_equal(c.cluster_local_liveness, 0);
    config_free(&c);
    char *argv[] = {"spmvd", "--cluster-pulse-ms", "50", "--cluster-pulse-addr", "auto", "--cluster-local-liveness",
                    "true", NULL};
    assert_int_equal(config_load(&c, 7, argv, errbuf, sizeof errbuf), 0);
    assert_int_equal(c.cluster_pulse_ms, 50);
    assert_string_equal(c.cluster_pulse_addr, "auto");
    assert_int_equal(c.cluster_local_liveness, 1);
    config_free(&c);
}

static void test_not_an_object(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_int_equal(apply(&c, "[1,2]"), -1);
    assert_int_equal(apply(&c, "{\"threads\": 4"), -1);
    assert_non_null(strstr(errbuf, "line"));
    assert_int_equal(apply(&c, "{\"threads\":4, \"threads\":5}"), -1);
    config_free(&c);
}

static void test_flags_override_file(void **state)
{
    (void)state;
    char path[] = "/tmp/spmvd-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"threads\": 2, \"queue_depth\": 7, \"log_level\": \"warn\"}";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    /* the flag comes before --config on the line and still wins */
    char *argv[] = {"spmvd", "--threads", "6", "--config", path, "--max-upload-bytes=2G",
                    "--auth-token-file", "", "--log-level", "debug", NULL};
    spmvd_config c;
    assert_int_equal(config_load(&c, 10, argv, errbuf, sizeof errbuf), 0);
    assert_int_equal(c.threads, 6);
    assert_int_equal(c.queue_depth, 7);
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(c.max_upload_bytes, INT64_C(2) << 30);
    assert_null(c.auth_token_file);
    config_free(&c);
    unlink(path);
}

static void test_bad_flags(void **state)
{
    (void)state;
    spmvd_config c;
    char *a1[] = {"spmvd", "--no-such-flag", "1", NULL};
    assert_int_equal(config_load(&c, 3, a1, errbuf, sizeof errbuf), -1);
    assert_non_null(strstr(errbuf, "no-such-flag"));
    config_free(&c);
    char *a2[] = {"spmvd", "--threads", NULL};
    assert_int_equal(config_load(&c, 2, a2, errbuf, sizeof errbuf), -1);
    config_free(&c);
    char *a3[] = {"spmvd", "--queue-depth", "12x", NULL};
    assert_int_equal(config_load(&c, 3, a3, errbuf, sizeof errbuf), -1);
    assert_non_null(strstr(errbuf, "queue_depth"));
    config_free(&c);
    char *a4[] = {"spmvd", "--config", "/nonexistent/spmvd.json", NULL};
    assert_int_equal(config_load(&c, 3, a4, errbuf, sizeof errbuf), -1);
    assert_non_null(strstr(errbuf, "/nonexistent/spmvd.json"));
    config_free(&c);
    char *a5[] = {"spmvd", "--max-runs", "9999999999999999999999", NULL};
    assert_int_equal(config_load(&c, 3, a5, errbuf, sizeof errbuf), -1);
    config_free(&c);
    char *a6[] = {"spmvd", "--version", NULL};
    assert_int_equal(config_load(&c, 2, a6, errbuf, sizeof errbuf), 0);
    assert_true(c.show_version);
    config_free(&c);
}

static void test_tls_pair(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_int_equal(apply(&c, "{\"tls_cert\":\"/etc/cert.pem\"}"), 0);
    assert_int_equal(config_validate(&c, errbuf, sizeof errbuf), -1);
    assert_non_null(strstr(errbuf, "tls_key"));
    assert_int_equal(apply(&c, "{\"tls_key\":\"/etc/key.pem\"}"), 0);
    assert_int_equal(config_validate(&c, errbuf, sizeof errbuf), 0);
    config_free(&c);
}

static void test_listen_and_devices(void **state)
{
    (void)state;
    char host[64];
    int port, list[CONFIG_MAX_DEVICES], n;
    bool all;
    assert_int_equal(config_split_listen("[::1]:9000", host, sizeof host, &port, errbuf, sizeof errbuf), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 9000);
    assert_int_equal(config_split_listen("0.0.0.0:0", host, sizeof host, &port, errbuf, sizeof errbuf), 0);
    assert_int_equal(port, 0);
    assert_int_equal(config_split_listen(":80", host, sizeof host, &port, errbuf, sizeof errbuf), -1);
    assert_int_equal(config_split_listen("[::1]9000", host, sizeof host, &port, errbuf, sizeof errbuf), -1);
    assert_int_equal(config_parse_devices("1,3", &all, list, &n, errbuf, sizeof errbuf), 0);
    assert_false(all);
    assert_int_equal(n, 2);
    assert_int_equal(list[1], 3);
    assert_int_equal(config_parse_devices("none", &all, list, &n, errbuf, sizeof errbuf), 0);
    assert_int_equal(n, 0);
    assert_false(all);
    assert_int_equal(config_parse_devices("all", &all, list, &n, errbuf, sizeof errbuf), 0);
    assert_true(all);
    assert_int_equal(config_parse_devices("64", &all, list, &n, errbuf, sizeof errbuf), -1);
    assert_int_equal(config_parse_devices("-1", &all, list, &n, errbuf, sizeof errbuf), -1);
}

/* config_to_json writes what config_apply_json reads back identically. */
static void test_dump_round_trip(void **state)
{
    (void)state;
    spmvd_config a, b;
    config_defaults(&a);
    assert_int_equal(apply(&a, "{\"threads\":3,\"auth_token_file\":\"/run/tok\",\"devices\":\"1\"}"), 0);
    char *text = config_to_json(&a);
    assert_non_null(text);
    config_defaults(&b);
    assert_int_equal(config_apply_json(&b, text, strlen(text), "dump", errbuf, sizeof errbuf), 0);
    char *again = config_to_json(&b);
    assert_string_equal(text, again);
    assert_int_equal(b.threads, 3);
    assert_string_equal(b.auth_token_file, "/run/tok");
    free(text);
    free(again);
    config_free(&a);
    config_free(&b);
}

/* A boolean key (allow_shm): true/false in a file, true/false/yes/no/1/0
 * as a flag; anything else refused naming the key; dumped as a boolean. */
static void test_boolean_key(void **state)
{
    (void)state;
    spmvd_config c;
    config_defaults(&c);
    assert_int_equal(c.allow_shm, 0);
    assert_int_equal(apply(&c, "{\"allow_shm\": true}"), 0);
    assert_int_equal(c.allow_shm, 1);
    assert_int_equal(apply(&c, "{\"allow_shm\": false}"), 0);
    assert_int_equal(c.allow_shm, 0);
    assert_int_equal(apply(&c, "{\"allow_shm\": 1}"), -1);
    assert_non_null(strstr(errbuf, "allow_shm"));
    assert_int_equal(apply(&c, "{\"allow_shm\": \"yes\"}"), -1);
    char *text = config_to_json(&c);
    assert_non_null(strstr(text, "\"allow_shm\": false"));
    free(text);
    config_free(&c);
    const char *yes[] = {"true", "yes", "1"}, *no[] = {"false", "no", "0"};
    for (int i = 0; i < 3; i++) {
        char *a1[] = {"spmvd", "--allow-shm", (char *)yes[i], NULL}, *a0[] = {"spmvd", "--allow-shm", (char *)no[i], NULL};
        assert_int_equal(config_load(&c, 3, a1, errbuf, sizeof errbuf), 0);
        assert_int_equal(c.allow_shm, 1);
        config_free(&c);
        assert_int_equal(config_load(&c, 3, a0, errbuf, sizeof errbuf), 0);
        assert_int_equal(c.allow_shm, 0);
        config_free(&c);
    }
    char *bad[] = {"spmvd", "--allow-shm", "maybe", NULL};
    assert_int_equal(config_load(&c, 3, bad, errbuf, sizeof errbuf), -1);
    assert_non_null(strstr(errbuf, "allow_shm"));
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_file_keys),
        cmocka_unit_test(test_default_dtype_mixed),
        cmocka_unit_test(test_refusals_name_the_key),
        cmocka_unit_test(test_not_an_object),
        cmocka_unit_test(test_flags_override_file),
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_tls_pair),
        cmocka_unit_test(test_listen_and_devices),
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_boolean_key),
        cmocka_unit_test(test_pulse_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
