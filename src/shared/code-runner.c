/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code-runner.h"
#include "macro.h"
#include "strv.h"

/* Python: through the buffered binary stdin, which the code's own sys.stdin then goes on
 * reading from; compiled as "<string>", as -c would. */
#define BOOT_PYTHON                                                                              \
        "import sys\n"                                                                           \
        "_n = int(sys.stdin.buffer.readline())\n"                                                \
        "_c = compile(sys.stdin.buffer.read(_n), '<string>', 'exec')\n"                          \
        "del _n\n"                                                                               \
        "sys.argv[:] = ['-c']\n"                                                                 \
        "exec(_c)\n"

/* Node: the exact bytes with readSync on fd 0 (a file or a pipe), then the code in this
 * context, as -e runs it (require, module, … are there). */
#define BOOT_NODE                                                                                \
        "(() => { const fs = require('fs');"                                                     \
        " const rd = (k) => { const b = Buffer.alloc(k); let o = 0;"                             \
        " while (o < k) { let r; try { r = fs.readSync(0, b, o, k - o, null); }"                 \
        " catch (e) { if (e.code === 'EAGAIN') continue; throw e; }"                             \
        " if (r <= 0) break; o += r; } return b.subarray(0, o); };"                              \
        " let h = ''; for (;;) { const c = rd(1); if (!c.length || c[0] === 10) break;"          \
        " h += String.fromCharCode(c[0]); }"                                                     \
        " globalThis.__sandboxd_code = rd(parseInt(h, 10) || 0).toString(); })();"              \
        "require('vm').runInThisContext((() => { const c = globalThis.__sandboxd_code;"           \
        " delete globalThis.__sandboxd_code; return c; })(), { filename: '[eval]' });"

/* The shells: read stops at the newline; head -c takes the code, no more. */
#define BOOT_SH "IFS= read -r n || exit 127; eval \"$(head -c \"$n\")\""

static const struct {
        const char *language;
        const char *argv[4];
} runners[] = {
        { "python",     { "python3", "-c", BOOT_PYTHON, NULL } },
        { "python3",    { "python3", "-c", BOOT_PYTHON, NULL } },
        { "node",       { "node", "-e", BOOT_NODE, NULL } },
        { "javascript", { "node", "-e", BOOT_NODE, NULL } },
        { "bash",       { "bash", "-c", BOOT_SH, NULL } },
        { "sh",         { "sh", "-c", BOOT_SH, NULL } },
        { "shell",      { "sh", "-c", BOOT_SH, NULL } },
};

const char * const *code_runner_argv(const char *language) {
        for (size_t i = 0; language && i < ELEMENTSOF(runners); i++)
                if (streq(runners[i].language, language))
                        return runners[i].argv;
        return NULL;
}

int code_runner_stdin(const char *code, size_t code_len, const char *in, size_t in_len, char **ret,
                      size_t *ret_len) {
        char head[32];
        size_t h = (size_t) snprintf(head, sizeof(head), "%zu\n", code_len);
        char *buf;

        buf = malloc(h + code_len + in_len + 1);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, head, h);
        if (code_len > 0)
                memcpy(buf + h, code, code_len);
        if (in_len > 0)
                memcpy(buf + h + code_len, in, in_len);
        buf[h + code_len + in_len] = 0;
        *ret = buf;
        *ret_len = h + code_len + in_len;
        return 0;
}
