/* SPDX-License-Identifier: MIT */
#include "varlink_service.h"

#include <errno.h>
#include <stddef.h>

#include "json_build.h"
#include "macro.h"
#include "params.h"

const char varlink_service_description[] =
        "# The Varlink service interface\n"
        "interface org.varlink.service\n"
        "\n"
        "method GetInfo() -> (\n"
        "  vendor: string,\n"
        "  product: string,\n"
        "  version: string,\n"
        "  url: string,\n"
        "  interfaces: []string\n"
        ")\n"
        "\n"
        "method GetInterfaceDescription(interface: string) -> (description: string)\n"
        "\n"
        "error InterfaceNotFound (interface: string)\n"
        "error MethodNotFound (method: string)\n"
        "error MethodNotImplemented (method: string)\n"
        "error InvalidParameter (parameter: string)\n"
        "error PermissionDenied ()\n"
        "error ExpectedMore ()\n";

static const struct param get_info_params[] = { {} };

static int service_get_info(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        const struct varlink_server *s = varlink_connection_server(c);
        const struct varlink_info *info = varlink_server_info(s);
        size_t n;
        (void) flags;
        (void) userdata;

        if (varlink_parse_params(c, params, get_info_params, NULL) < 0)
                return 0;
        const struct varlink_interface *ifs = varlink_server_interfaces(s, &n);
        struct json_object *p = json_object_new_object(), *ifaces = json_object_new_array();
        jb_set_string(&p, "vendor", info->vendor);
        jb_set_string(&p, "product", info->product);
        jb_set_string(&p, "version", info->version);
        jb_set_string(&p, "url", info->url);
        for (size_t i = 0; i < n; i++)
                jb_append(&ifaces, json_object_new_string(ifs[i].name));
        jb_set(&p, "interfaces", ifaces);
        return varlink_reply(c, p);
}

struct get_description_params {
        const char *interface;
};

static const struct param get_description_params[] = {
        { "interface", PARAM_STRING, offsetof(struct get_description_params, interface), .mandatory = true },
        {}
};

static int service_get_interface_description(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                             void *userdata) {
        struct get_description_params p = {};
        (void) flags;
        (void) userdata;

        if (varlink_parse_params(c, params, get_description_params, &p) < 0)
                return 0;
        const struct varlink_interface *i = varlink_server_find_interface(varlink_connection_server(c), p.interface);
        if (!i)
                return varlink_error(c, VARLINK_ERROR_INTERFACE_NOT_FOUND,
                                     jb_object_with("interface", json_object_new_string(p.interface)));
        return varlink_reply(c, jb_object_with("description", json_object_new_string(i->description)));
}

const struct varlink_method varlink_service_methods[VARLINK_SERVICE_N_METHODS] = {
        { "GetInfo", service_get_info, get_info_params },
        { "GetInterfaceDescription", service_get_interface_description, get_description_params },
};
