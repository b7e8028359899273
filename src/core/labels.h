/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A sandbox's labels (Labels, sandboxd-api(7)): key/value pairs a caller gives at create
 * to find its sandboxes by (E2B's metadata, Kubernetes' labels). Keys have the syntax of
 * Kubernetes label keys; values are free text (E2B's metadata is), bounded. Kept as a
 * string vector of "key=value" sorted by key: a key has no '=', so the first one splits. */

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "sandbox-api.h"
#include "sandbox-errors.h"

/* Whether key is a Kubernetes label key: an optional prefix (a DNS subdomain of at most
 * 253 characters) and '/', then a name of 1 to 63 of A-Z a-z 0-9 - _ . beginning and
 * ending with a letter or digit. */
bool label_key_is_valid(const char *key);
/* Whether value is 0 to SANDBOX_LABEL_VALUE_MAX bytes of UTF-8 without control characters. */
bool label_value_is_valid(const char *value);

/* pairs: key, value, key, value, …, NULL (D-Bus a{ss}, a JSON object's members), each
 * checked; ret: the labels, sorted, "key=value" each. InvalidOption (-EINVAL) names what
 * is wrong: a bad key or value, a key given twice, more than SANDBOX_LABELS_MAX labels or
 * SANDBOX_LABELS_BYTES_MAX bytes. */
int labels_from_pairs(char * const *pairs, char ***ret, SandboxError *error);

/* A selector: "key=value" (the label has that value) or "key" (the sandbox has the label).
 * InvalidOption when its key or value could never match. */
int label_selector_check(const char *selector, SandboxError *error);
/* Whether labels match every selector (none: all match). */
bool labels_match(char * const *labels, char * const *selectors);

/* The value of key, or NULL. */
const char *labels_get(char * const *labels, const char *key);

/* As a JSON object (a new reference; an empty object for none). */
json_object *labels_to_json(char * const *labels);
/* From a JSON object of strings, each checked as labels_from_pairs() does. */
int labels_from_json(json_object *o, char ***ret, SandboxError *error);

/* "key=value key=value" for a unit's Description (values with spaces quoted "…"), into a
 * new string; "" for none. */
int labels_format(char * const *labels, char **ret);
