/* SPDX-License-Identifier: MIT */
#include "lowmem.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "cgroup.h"

#include "list.h"
#include "log.h"
#include "pidref.h"
#include "macro.h"

#define LMM_NAME "org.freedesktop.LowMemoryMonitor"
#define LMM_PATH "/org/freedesktop/LowMemoryMonitor"
#define LMM_INTERFACE "org.freedesktop.LowMemoryMonitor"

/* A connection on the bus, and the cgroup its process is in: it hears of that cgroup's pressure too. */
struct lowmem_peer {
        struct lowmem *lm;
        struct lowmem_peer *prev, *next;
        char *name;   /* its unique name */
        struct scope *scope;
        sd_bus_slot *query; /* the question for its credentials, while it is open */
        uid_t uid;
        uint64_t last_sent[_LEVEL_MAX];
};

/* Peers followed at most: each is a watched cgroup's reference and a few bytes. */
#define LOWMEM_PEERS_MAX 1024

struct lowmem {
        sd_event *event;
        const struct config *config;
        struct scope_registry *scopes;
        sd_bus *bus;
        sd_bus_slot *vtable_slot, *name_slot, *owner_slot, *list_slot;
        bool owner;                        /* the name is ours */
        uint64_t last_sent[_LEVEL_MAX];    /* CLOCK_MONOTONIC µs of each level's last signal */
        struct lowmem_peer *peers;
        size_t n_peers;
};

unsigned lowmem_level_byte(enum level l) {
        /* GMemoryMonitorWarningLevel: LOW 50, MEDIUM 100, CRITICAL 255. */
        static const unsigned bytes[_LEVEL_MAX] = { 0, 50, 100, 255 };
        return l >= 0 && l < _LEVEL_MAX ? bytes[l] : 0;
}

/* No methods, no properties: introspection and Properties.GetAll ({}) come from sd-bus. */
static const sd_bus_vtable lowmem_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_SIGNAL("LowMemoryWarning", "y", 0),
        SD_BUS_VTABLE_END,
};

/* destination NULL: to everyone. */
static int send_warning(struct lowmem *lm, const char *destination, enum level l) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_message_new_signal(lm->bus, &m, LMM_PATH, LMM_INTERFACE, "LowMemoryWarning");
        if (r >= 0 && destination)
                r = sd_bus_message_set_destination(m, destination);
        if (r >= 0)
                r = sd_bus_message_append(m, "y", (uint8_t) lowmem_level_byte(l));
        if (r >= 0)
                r = sd_bus_send(lm->bus, m, NULL);
        return r;
}

/* Every threshold crossed, lowest first, as the kernel triggers of low-memory-monitor would fire; each
 * level at most once per repeat interval while the pressure comes and goes. */
static void warn_rise(struct lowmem *lm, const char *destination, uint64_t *last_sent, enum level from, enum level to) {
        uint64_t now = 0;
        (void) sd_event_now(lm->event, CLOCK_MONOTONIC, &now);
        for (enum level l = from + 1; l <= to; l++) {
                if (last_sent[l] > 0 && now - last_sent[l] < lm->config->low_memory_monitor_repeat_usec)
                        continue;
                int r = send_warning(lm, destination, l);
                if (r < 0) {
                        log_warning_errno(r, "Failed to send LowMemoryWarning: %m");
                        return;
                }
                last_sent[l] = now;
        }
}

static void on_level_changed(struct scope *s, void *userdata) {
        struct lowmem *lm = userdata;

        if (scope_level(s) <= scope_previous(s) || !lm->owner)
                return;
        if (scope_get_type(s) == SCOPE_SYSTEM) {
                warn_rise(lm, NULL, lm->last_sent, scope_previous(s), scope_level(s));
                return;
        }
        /* A cgroup: to the bus peers inside it alone, so that an application hears of its own slice. */
        for (struct lowmem_peer *p = lm->peers; p; p = p->next)
                if (p->scope == s)
                        warn_rise(lm, p->name, p->last_sent, scope_previous(s), scope_level(s));
}

static void peer_release_scope(struct lowmem_peer *p) {
        scope_registry_release_for(p->lm->scopes, p->uid, p->scope);
        p->scope = NULL;
}

static void on_gone(struct scope *s, void *userdata) {
        struct lowmem *lm = userdata;
        for (struct lowmem_peer *p = lm->peers; p; p = p->next)
                if (p->scope == s)
                        peer_release_scope(p);
}

static void peer_free(struct lowmem_peer *p) {
        struct lowmem *lm = p->lm;
        sd_bus_slot_unref(p->query);
        if (p->scope)
                peer_release_scope(p);
        LIST_REMOVE(lm->peers, p);
        lm->n_peers--;
        free(p->name);
        free(p);
}

/* GetConnectionCredentials' answer: its uid and pid. */
static int read_credentials(sd_bus_message *reply, uint32_t *ret_uid, uint32_t *ret_pid) {
        const char *key;
        bool have_uid = false;
        int r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0 && (streq(key, "UnixUserID") || streq(key, "ProcessID"))) {
                        bool uid = streq(key, "UnixUserID");
                        r = sd_bus_message_read(reply, "v", "u", uid ? ret_uid : ret_pid);
                        have_uid = have_uid || (uid && r >= 0);
                } else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        return r < 0 ? r : have_uid ? 0 : -ENODATA;
}

static int on_peer_credentials(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        struct lowmem_peer *p = userdata;
        struct lowmem *lm = p->lm;
        _cleanup_free_ char *cgroup = NULL;
        uint32_t uid = UINT32_MAX, pid = 0;
        (void) ret_error;

        p->query = sd_bus_slot_unref(p->query);
        /* The bus vouches for a pid, not for a process: by now the number may be another's. The cgroup is
         * read only from a process of the peer's own user (a successor of its own is no gain to it). */
        _cleanup_close_ int proc = -EBADF;
        if (sd_bus_message_is_method_error(reply, NULL) || read_credentials(reply, &uid, &pid) < 0 || pid == 0 ||
            (proc = pidref_open_proc_of_uid((pid_t) pid, uid)) < 0 || cgroup_proc_get_path(proc, &cgroup) < 0 ||
            streq(cgroup, "/")) {
                peer_free(p); /* gone already, or in the root cgroup: the system's warnings are its */
                return 0;
        }
        /* Each peer is a watched cgroup, in its user's budget like a Subscribe's. */
        struct scope_id id = { .type = SCOPE_CGROUP, .node = -1, .cgroup = cgroup };
        p->uid = uid;
        if (scope_registry_acquire_for(lm->scopes, uid, &id, &p->scope) < 0)
                peer_free(p);
        return 0;
}

static void peer_new(struct lowmem *lm, const char *name) {
        const char *self = NULL;
        if (name[0] != ':' || lm->n_peers >= LOWMEM_PEERS_MAX || (sd_bus_get_unique_name(lm->bus, &self) >= 0 && streq(self, name)))
                return;
        struct lowmem_peer *p = calloc(1, sizeof(*p));
        if (!p || !(p->name = strdup(name))) {
                free(p);
                return;
        }
        p->lm = lm;
        LIST_PREPEND(lm->peers, p);
        lm->n_peers++;
        if (sd_bus_call_method_async(lm->bus, &p->query, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "GetConnectionCredentials", on_peer_credentials, p, "s", name) < 0)
                peer_free(p);
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct lowmem *lm = userdata;
        const char *name, *old_owner, *new_owner;
        (void) ret_error;

        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || name[0] != ':')
                return 0;
        if (!old_owner[0] && new_owner[0])
                peer_new(lm, name);
        else if (old_owner[0] && !new_owner[0])
                for (struct lowmem_peer *p = lm->peers; p; p = p->next)
                        if (streq(p->name, name)) {
                                peer_free(p);
                                break;
                        }
        return 0;
}

static int on_list_names(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        struct lowmem *lm = userdata;
        const char *name;
        (void) ret_error;

        lm->list_slot = sd_bus_slot_unref(lm->list_slot);
        if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_enter_container(reply, 'a', "s") < 0)
                return 0;
        while (sd_bus_message_read(reply, "s", &name) > 0)
                peer_new(lm, name);
        return 0;
}

static const struct scope_observer observer = {
        .level_changed = on_level_changed,
        .gone = on_gone,
};

static int on_name(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        struct lowmem *lm = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        (void) ret_error;

        if (e) {
                /* low-memory-monitor, most likely: it stays the one GLib listens to. */
                log_notice("Cannot own %s on the system bus (%s): not sending LowMemoryWarning.", LMM_NAME,
                           e->message ? e->message : e->name);
                return 0;
        }
        uint32_t ret = 0;
        (void) sd_bus_message_read(reply, "u", &ret);
        lm->owner = ret == 1 /* PRIMARY_OWNER */ || ret == 4 /* ALREADY_OWNER */;
        if (lm->owner)
                log_info("Owning %s on the system bus: GLib applications hear of system memory pressure.", LMM_NAME);
        else
                log_notice("%s belongs to another service on the system bus: not sending LowMemoryWarning.", LMM_NAME);
        return 0;
}

int lowmem_new(sd_event *event, const struct config *config, struct scope_registry *scopes, struct lowmem **ret) {
        assert(event);

        *ret = NULL;
        if (!config->low_memory_monitor)
                return 0;
        struct lowmem *lm = calloc(1, sizeof(*lm));
        if (!lm)
                return -ENOMEM;
        lm->event = event;
        lm->config = config;
        lm->scopes = scopes;
        int r = sd_bus_open_system_with_description(&lm->bus, "pressured-lowmem");
        if (r < 0) {
                /* No system bus (a container, a test): nothing to offer, nothing wrong. */
                log_debug_errno(r, "No system bus, not offering %s: %m", LMM_NAME);
                free(lm);
                return 0;
        }
        r = sd_bus_attach_event(lm->bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_add_object_vtable(lm->bus, &lm->vtable_slot, LMM_PATH, LMM_INTERFACE, lowmem_vtable, lm);
        if (r >= 0)
                r = sd_bus_request_name_async(lm->bus, &lm->name_slot, LMM_NAME, 0, on_name, lm);
        /* The peers, and the ones to come: each hears of its own cgroup. */
        if (r >= 0)
                r = sd_bus_match_signal_async(lm->bus, &lm->owner_slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                              "org.freedesktop.DBus", "NameOwnerChanged", on_name_owner_changed, NULL, lm);
        if (r >= 0)
                r = sd_bus_call_method_async(lm->bus, &lm->list_slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "ListNames", on_list_names, lm, "");
        if (r >= 0)
                r = scope_registry_add_observer(scopes, &observer, lm);
        if (r < 0) {
                log_warning_errno(r, "Failed to offer %s on the system bus, going on without it: %m", LMM_NAME);
                lowmem_free(lm);
                return 0;
        }
        *ret = lm;
        return 0;
}

struct lowmem *lowmem_free(struct lowmem *lm) {
        if (!lm)
                return NULL;
        while (lm->peers)
                peer_free(lm->peers);
        sd_bus_slot_unref(lm->list_slot);
        sd_bus_slot_unref(lm->owner_slot);
        sd_bus_slot_unref(lm->name_slot);
        sd_bus_slot_unref(lm->vtable_slot);
        sd_bus_flush_close_unref(lm->bus);
        free(lm);
        return NULL;
}
