/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* GET /console: a page for people (docs/TERMINALS.md): the token's tenant's sandboxes, their
 * state and metrics, and a terminal with xterm.js (vendored, MIT: console/LICENSE.xterm) on
 * GET …/terminal. Static files built into the bridge, public: the page asks for the token
 * and sends it only to the API routes. */

#include "console.html.h"
#include "console.js.h"
#include "http.h"
#include "xterm.css.h"
#include "xterm.js.h"

/* The page loads only its own files and talks only to its own origin. */
#define CONSOLE_CSP "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; " \
                    "img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

static int reply_file(HttpRequest *req, const char *type, const char *text) {
        return http_request_reply_static(req, type, text, CONSOLE_CSP);
}

int http_route_console(HttpRequest *req) {
        return reply_file(req, "text/html; charset=utf-8", sandboxd_console_html);
}

int http_route_console_file(HttpRequest *req) {
        const char *name = http_request_param(req, 0);

        if (streq(name, "console.js"))
                return reply_file(req, "text/javascript; charset=utf-8", sandboxd_console_js);
        if (streq(name, "xterm.js"))
                return reply_file(req, "text/javascript; charset=utf-8", sandboxd_xterm_js);
        if (streq(name, "xterm.css"))
                return reply_file(req, "text/css; charset=utf-8", sandboxd_xterm_css);
        return http_request_reply_error(req, 404, "NotFound", "No file %s in the console.", name);
}
