/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Names in varlink interface descriptions (https://varlink.org/Interface-Definition).
 * Not a parser of the types: the server needs an interface's name, to route calls and
 * answer GetInterfaceDescription, and its method names, to tell MethodNotFound from
 * MethodNotImplemented and to refuse binding a method the description lacks. Checking a
 * call's parameters is the method's job.
 */

#include <stdbool.h>

#define VARLINK_NAME_MAX 255

/* "org.varlink.service": [A-Za-z]([-]*[A-Za-z0-9])*(\.[A-Za-z0-9]([-]*[A-Za-z0-9])*)+ */
bool varlink_interface_name_is_valid(const char *s);
/* A method, error or type name: [A-Z][A-Za-z0-9]* */
bool varlink_member_name_is_valid(const char *s);
/* "org.varlink.service.GetInfo": a valid interface name, a dot, a valid member name. */
bool varlink_qualified_name_is_valid(const char *s);

/* Reads the declarations of an interface description: exactly one "interface NAME", first,
 * then "method", "type" and "error" declarations with valid, distinct names and balanced
 * parentheses. Returns 0 with the interface name and the method names (a NULL-terminated
 * vector, in order of declaration), -EINVAL if idl is not such a description, -ENOMEM. */
int varlink_idl_scan(const char *idl, char **ret_interface, char ***ret_methods);
