/* config.h — the daemon's configuration: one struct, one table of keys.
 *
 * Values come from three layers, later ones winning: built-in defaults, a
 * JSON file (/etc/spmvd/spmvd.json when it exists, or --config FILE), and a
 * command-line flag per key (--max-upload-bytes for max_upload_bytes). Every
 * key is validated for type and range with a message that names it. The key
 * table in config.c is the single list the parser, --help and the docs
 * (config/README.md) follow.
 */
#ifndef SPMVD_CONFIG_H
#define SPMVD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#define CONFIG_DEFAULT_FILE "/etc/spmvd/spmvd.json"
#define CONFIG_MAX_DEVICES 64
#define CONFIG_MAX_UPLOAD_WORKERS 16

typedef struct spmvd_config {
    char *listen;                  /* "host:port" or "[v6]:port" */
    char *state_dir;
    int64_t threads;               /* HTTP thread pool size */
    int64_t max_upload_bytes;
    int64_t max_body_bytes;
    int64_t max_rows;              /* rows and columns of an uploaded matrix */
    int64_t max_nnz;
    int64_t max_matrix_bytes;      /* host bytes one matrix's CSR may take (0: a quarter of the host's memory) */
    int64_t max_spmspm_nnz;        /* entries an SpMSpM's C may have by its estimate (0: sized to memory) */
    int64_t max_job_result_bytes;  /* finished jobs' results together, and one JSON answer */
    int64_t max_runs;
    int64_t max_request_work;      /* multiply-adds one spmv/bench request may ask for */
    int64_t tune_budget_ms;        /* wall time the auto kernel may spend tuning one matrix */
    int64_t tune_max_runs;         /* kernel runs it may spend (0: only the time budget) */
    char *auto_build;              /* "repaid" or "eager": when auto builds a packed format (daemon/payback.c) */
    int64_t auto_build_products;   /* products a matrix needs before auto builds one whose payback is unknown */
    int64_t vector_ttl_s;          /* idle seconds before a resident vector expires */
    int64_t max_vector_bytes;      /* per device */
    int64_t max_vectors;           /* per device */
    int64_t max_ops_steps;
    int64_t max_solve_iterations;
    int64_t queue_depth;
    int64_t batch_window_us;       /* products arriving within it run as one SpMM (daemon/batch.c); 0: off */
    int64_t job_retention;         /* seconds */
    char *devices;                 /* "all", "none" or "0,2" */
    char *default_dtype;
    int64_t default_hack_size;
    int64_t device_reserve_bytes;
    int64_t max_padding;           /* padded slots per non-zero a derived format may hold (0: no bound) */
    int64_t max_format_bytes;      /* bytes one derived format may hold (0: no bound) */
    int64_t padding_allowance_bytes; /* bytes a format past max_padding may still take (0: none) */
    int64_t host_format_bytes;     /* host memory for derived formats built on demand (0: no bound) */
    int64_t serial_below;          /* host loops under this many values run on one thread (engine/spmv.h) */
    int64_t allow_shm;             /* 0/1: POST /v1/shm and operands in regions */
    int64_t max_shm_regions;
    int64_t io_buffer_bytes;       /* idle binary-path buffers kept (daemon/bufpool.h) */
    int64_t cluster_timeout_ms;    /* every wait of the cluster (mpirun): past it the cluster has failed */
    int64_t cluster_heartbeat_ms;  /* an idle rank answers rank 0's heartbeat within it, or the cluster has failed */
    char *cluster_halo;            /* "auto" (CUDA IPC where it can) or "nccl" */
    int64_t cluster_pulse_ms;      /* every rank > 0 sends rank 0 a datagram this often (0: no pulse) */
    char *cluster_pulse_addr;      /* rank 0's IPv4 address for the pulses, or "auto" */
    int64_t cluster_local_liveness; /* 0/1: rank 0 looks at its host's ranks in /proc (false: tests) */
    int64_t shard_nnz;             /* mpirun: uploads naming no shard/device with this many entries shard (0: never) */
    int64_t shard_when_full;       /* 0/1 mpirun: a GPU upload that fits none of rank 0's GPUs shards instead */
    int64_t connection_timeout;    /* seconds */
    int64_t connection_memory_limit;
    int64_t max_connections;
    int64_t upload_workers;        /* threads that read and build uploads (d->loaders) */
    int64_t per_ip_connections;    /* 0: unlimited */
    int64_t header_timeout_s;      /* request line and headers, from the connection or the previous answer */
    int64_t body_timeout_s;        /* a body's grace before body_min_rate applies */
    int64_t body_min_rate;         /* bytes/s a body must average past body_timeout_s; 0: none */
    char *log_level;
    char *auth_token_file;         /* NULL: no authentication */
    char *tls_cert;                /* NULL: plain HTTP */
    char *tls_key;

    /* Not keys: what the command line asked for. */
    char *config_file;             /* NULL: the default file if it exists */
    bool check_only, show_help, show_version;
} spmvd_config;

/* Fills built-in defaults (allocates the strings). */
void config_defaults(spmvd_config *c);
void config_free(spmvd_config *c);

/* Applies a JSON object text (a configuration file's contents); `origin`
 * names it in messages. 0, or -1 with err set ("config key `threads`: ..."). */
int config_apply_json(spmvd_config *c, const char *text, size_t len,
                      const char *origin, char *err, size_t errlen);
int config_apply_file(spmvd_config *c, const char *path, char *err, size_t errlen);

/* Parses argv: only --config/--help/--version/--check-config when
 * `pass` is 0, every key flag when `pass` is 1 (so flags override the file
 * whichever order they come in). */
int config_parse_args(spmvd_config *c, int argc, char **argv, int pass,
                      char *err, size_t errlen);

/* The three layers in order: defaults, file, flags. */
int config_load(spmvd_config *c, int argc, char **argv, char *err, size_t errlen);

/* Cross-key checks (tls_cert without tls_key, listen parses, ...). */
int config_validate(const spmvd_config *c, char *err, size_t errlen);

/* "host:port" -> host (without brackets) and port. */
int config_split_listen(const char *listen, char *host, size_t hostlen,
                        int *port, char *err, size_t errlen);

/* The devices key as a list of GPU indices: *all set for "all", count 0 for
 * "none". */
int config_parse_devices(const char *spec, bool *all, int *list, int *count,
                         char *err, size_t errlen);

/* Writes --help text (every flag with its default) to stdout. */
void config_print_help(const char *prog);
/* The effective configuration as a JSON object text (caller frees). */
char *config_to_json(const spmvd_config *c);

#endif
