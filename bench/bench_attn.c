/* The attention kernel benchmark as a standalone program: the same code as
 * `attn bench` (tools/attn/bench.c, linked in by bench/kernels.cmake), for
 * builds without the CLI. Options: see --help. */
#include "cli.h"

int main(int argc, char **argv)
{
    argv[0] = "bench";
    return attn_cmd_bench(argc, argv);
}
