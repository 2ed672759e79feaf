#include "server/openapi.h"

namespace estuary {

std::string_view OpenApiDocument() {
  static constexpr std::string_view kDoc = R"json({
  "openapi": "3.0.3",
  "info": {"title": "estuary", "version": "1", "description": "The estuary GPU scheduler service (issue 7). Every route but this document needs 'Authorization: Bearer TOKEN'."},
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "schemas": {
      "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
      "JobRequest": {"type": "object", "additionalProperties": false, "required": ["name"], "description": "The one job schema of docs/schema.md (the same fields as a scenario's jobs)",
        "properties": {
          "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"},
          "class": {"type": "string", "enum": ["hp-inference", "hp-training", "dev", "lp", "spot"]},
          "replicas": {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 100000}, {"type": "object", "required": ["min"], "additionalProperties": false,
            "properties": {"min": {"type": "integer", "minimum": 1, "maximum": 100000}, "max": {"type": "integer", "minimum": 1, "maximum": 100000}, "step": {"type": "integer", "minimum": 1}}}], "default": 1},
          "gpus": {"type": "integer", "minimum": 0, "maximum": 16, "default": 0},
          "gpu_milli": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000},
          "cpu_milli": {"type": "integer", "minimum": 0, "default": 1000}, "cpu_cores": {"type": "integer", "minimum": 0},
          "memory_mib": {"type": "integer", "minimum": 0, "default": 1024}, "memory_gib": {"type": "integer", "minimum": 0},
          "priority": {"type": "integer", "minimum": 0, "maximum": 1000},
          "preemptible": {"type": "boolean"},
          "models": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 16}]},
          "plane": {"type": "string"}, "required_level": {"type": "string"}, "preferred_level": {"type": "string"},
          "duration_s": {"type": "integer", "minimum": 0, "default": 3600},
          "checkpoint_interval_s": {"type": "integer", "minimum": 0},
          "checkpoint_on_notice_s": {"type": "integer", "minimum": 0},
          "restart_cost_s": {"type": "integer", "minimum": 0},
          "usable_step": {"type": "integer", "minimum": 0},
          "labels": {"type": "object", "additionalProperties": {"type": "string"}},
          "command": {"$ref": "#/components/schemas/Command"},
          "env": {"oneOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*="}}]},
          "workdir": {"type": "string", "pattern": "^/"},
          "checkpoint_signal": {"type": "string", "default": "SIGTERM"},
          "hooks": {"type": "object", "additionalProperties": false, "properties": {"standby_enter": {"$ref": "#/components/schemas/Command"},
            "standby_leave": {"$ref": "#/components/schemas/Command"}, "ready": {"$ref": "#/components/schemas/Command"}}}}},
      "Command": {"oneOf": [{"type": "string", "minLength": 1, "description": "run by /bin/sh -c"},
          {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "argv"}]},
      "Job": {"type": "object", "properties": {
          "id": {"type": "string"}, "name": {"type": "string"}, "tenant": {"type": "string"},
          "state": {"type": "string", "enum": ["pending", "running", "succeeded", "failed", "cancelled"]},
          "replicas": {"type": "object"}, "gpus": {"type": "integer"}, "gpu_milli": {"type": "integer"},
          "cpu_milli": {"type": "integer"}, "memory_mib": {"type": "integer"}, "priority": {"type": "integer"},
          "preemptible": {"type": "boolean"}, "bound_replicas": {"type": "integer"}, "running_replicas": {"type": "integer"},
          "standby_replicas": {"type": "integer"}, "migrating_replicas": {"type": "integer"},
          "submitted_ms": {"type": "integer"}, "running_ms": {"type": "integer"}, "ended_ms": {"type": "integer"},
          "reason": {"type": "string"}}},
      "Node": {"type": "object", "properties": {
          "name": {"type": "string"}, "gpus": {"type": "integer"}, "gpu_model": {"type": "string"},
          "cpu_milli": {"type": "integer"}, "memory_mib": {"type": "integer"},
          "domains": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}}}},
      "Order": {"type": "object", "properties": {
          "seq": {"type": "integer"}, "op": {"type": "string", "enum": ["start", "stop", "evict", "standby", "resume", "migrate"]}, "deadline_ms": {"type": "integer"}, "task": {"type": "string"},
          "instance": {"type": "integer", "description": "the instance it starts (start, migrate) or is for; reports of it name it"},
          "job": {"type": "string"}, "node": {"type": "string"}, "gpus": {"type": "array", "items": {"type": "integer"}},
          "from": {"type": "string", "description": "migrate: where the old instance runs"}, "duration_s": {"type": "integer"}}}
    }
  },
  "security": [{"bearer": []}],
  "paths": {
    "/v1/jobs": {
      "post": {"summary": "Submit a job (tenant, admin)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobRequest"}}}},
        "responses": {"201": {"description": "accepted and stored", "content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}},
          "400": {"description": "malformed JSON or an invalid field"}, "401": {"description": "no or unknown token"}, "403": {"description": "role"}, "413": {"description": "body too large"}, "429": {"description": "rate limit"}}},
      "get": {"summary": "The caller's jobs (an admin: all)", "responses": {"200": {"description": "jobs", "content": {"application/json": {"schema": {"type": "object", "properties": {"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}}}}}}}}}
    },
    "/v1/jobs/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9]+$"}}],
      "get": {"summary": "One job", "responses": {"200": {"description": "the job", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "404": {"description": "no such job, or another tenant's"}}},
      "patch": {"summary": "Change a job's min and max replicas", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"replicas": {"type": "object", "additionalProperties": false, "properties": {"min": {"type": "integer", "minimum": 1}, "max": {"type": "integer", "minimum": 1}}}}}}}},
        "responses": {"200": {"description": "the job", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "400": {"description": "invalid bounds, a min above the running replicas, or an ended job"}, "404": {"description": "no such job, or another tenant's"}}},
      "delete": {"summary": "Cancel a job", "responses": {"200": {"description": "the job, cancelled", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "404": {"description": "no such job, or another tenant's"}}}
    },
    "/v1/jobs/{id}/explain": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9]+$"}}],
      "get": {"summary": "Why a job waits and what would make it fit", "responses": {"200": {"description": "fits_now, may_reclaim, reclaim_feasible, reclaim_victims, reclaim_victims_max_priority, shortfall, held_nodes, advice"}, "404": {"description": "no such job, or another tenant's"}}}
    },
    "/v1/reservations": {
      "post": {"summary": "Hold nodes for a waiting job", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "required": ["job"], "properties": {"job": {"type": "string"}, "ttl_s": {"type": "integer", "minimum": 1, "maximum": 604800}}}}}},
        "responses": {"201": {"description": "held: id, job, tenant, nodes, created_ms, expires_ms"}, "400": {"description": "the job is not waiting, or nothing could hold it"}, "404": {"description": "no such job"}}},
      "get": {"summary": "The caller's reservations", "responses": {"200": {"description": "reservations"}}}
    },
    "/v1/reservations/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9]+$"}}],
      "delete": {"summary": "End a reservation", "responses": {"200": {"description": "ended"}, "404": {"description": "no such reservation"}}}
    },
    "/v1/standby": {
      "post": {"summary": "A standby window: from from_ms (default now) until to_ms, `replicas` of the job's replicas lend their GPUs to spot work (preemptible, below HP); they are back by to_ms", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "required": ["job", "to_ms", "replicas"], "properties": {"job": {"type": "string"}, "from_ms": {"type": "integer", "minimum": 0}, "to_ms": {"type": "integer", "minimum": 0}, "replicas": {"type": "integer", "minimum": 1}}}}}},
        "responses": {"201": {"description": "the window: id, job, tenant, from_ms, to_ms, replicas"}, "400": {"description": "an invalid field, an overlap with another window of the job, or an ended job"}, "404": {"description": "no such job, or another tenant's"}}},
      "get": {"summary": "The caller's standby windows", "responses": {"200": {"description": "windows"}}}
    },
    "/v1/standby/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9]+$"}}],
      "delete": {"summary": "End a standby window (its replicas resume after their borrowers' grace period)", "responses": {"200": {"description": "ended"}, "404": {"description": "no such window"}}}
    },
    "/v1/defrag": {
      "post": {"summary": "Plan a defragmentation now and migrate its moves, make-before-break (admin)", "responses": {"200": {"description": "moves: the moves planned (0 while earlier moves run)"}}}
    },
    "/v1/nodes/{name}/{action}": {
      "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                     {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["cordon", "uncordon", "drain", "evacuate", "fail", "restore"]}}],
      "post": {"summary": "An admin's action on a node", "responses": {"200": {"description": "the node"}, "404": {"description": "no such node"}}}
    },
    "/v1/config": {
      "get": {"summary": "The scheduler configuration (admin)", "responses": {"200": {"description": "policy, grace_s, absorb, heartbeat_timeout_s, defrag_interval_s, and (read only) engine: the engine's whole configuration in use, as a history's config record (docs/history.md)"}}},
      "put": {"summary": "Change grace_s, absorb, heartbeat_timeout_s or defrag_interval_s (admin; stored)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"grace_s": {"type": "integer", "minimum": 0, "maximum": 86400}, "absorb": {"type": "boolean"}, "heartbeat_timeout_s": {"type": "integer", "minimum": 1, "maximum": 86400}, "defrag_interval_s": {"type": "integer", "minimum": 0, "maximum": 604800}}}}}},
        "responses": {"200": {"description": "the configuration"}, "400": {"description": "an invalid field"}}}
    },
    "/v1/queues": {
      "get": {"summary": "The multi-tenant queues: each queue's spec, GPUs held, guaranteed, limit, fair share, entitled, borrowed, lent and pending, its waiting and running jobs, and the sharing (tenants: the queues they may use and those above; admins: all)", "responses": {"200": {"description": "queues and sharing"}}},
      "put": {"summary": "Replace the queues and, when given, the sharing (admin; stored; the schema of a configuration's queues: and sharing:, docs/schema.md)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "required": ["queues"], "properties": {"queues": {"type": "array", "items": {"type": "object"}}, "sharing": {"type": "object"}}}}}},
        "responses": {"200": {"description": "the queues"}, "400": {"description": "an invalid field, or a queue a job still runs or waits in would go"}, "403": {"description": "not an admin"}}}
    },
    "/v1/stats": {"get": {"summary": "Allocation and queues over the last hour (admin)", "responses": {"200": {"description": "samples"}}}},
    "/v1/nodes": {
      "post": {"summary": "Register nodes (agent)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "properties": {"nodes": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}},
        "responses": {"200": {"description": "registered"}, "400": {"description": "invalid node"}, "403": {"description": "a node of another agent"}}},
      "get": {"summary": "All nodes (admin)", "responses": {"200": {"description": "nodes, each with its state: ready, cordoned, evacuating (until it holds no task), drained or failed"}}}
    },
    "/v1/nodes/heartbeat": {
      "post": {"summary": "Heartbeat of the agent's nodes (agent)", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"nodes": {"type": "array", "items": {"type": "string"}}}}}}},
        "responses": {"200": {"description": "stamped"}, "403": {"description": "a node of another agent"}}}
    },
    "/v1/agent/orders": {
      "get": {"summary": "Long-poll the agent's orders", "parameters": [
          {"name": "epoch", "in": "query", "schema": {"type": "integer"}}, {"name": "after", "in": "query", "schema": {"type": "integer"}},
          {"name": "wait_ms", "in": "query", "schema": {"type": "integer", "maximum": 30000}}],
        "responses": {"200": {"description": "orders with seq > after", "content": {"application/json": {"schema": {"type": "object", "properties": {"epoch": {"type": "integer"}, "last_seq": {"type": "integer"}, "orders": {"type": "array", "items": {"$ref": "#/components/schemas/Order"}}}}}}}}}
    },
    "/v1/agent/reports": {
      "post": {"summary": "Task states (agent)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "properties": {"reports": {"type": "array", "items": {"type": "object", "properties": {"task": {"type": "string"}, "node": {"type": "string", "description": "the instance's node (a migrating replica has two)"}, "instance": {"type": "integer", "description": "the instance its start order named (a report of an instance the service no longer tracks is dropped); absent: matched by node"}, "state": {"type": "string", "enum": ["running", "succeeded", "failed", "stopped", "standby", "standby-failed"]}, "reason": {"type": "string", "description": "failed, standby-failed: why"}}}}}}}}},
        "responses": {"200": {"description": "queued"}, "403": {"description": "a task on a node of another agent"}}}
    },
    "/v1/debug/invariants": {"get": {"summary": "The service's invariants (admin)", "responses": {"200": {"description": "they hold"}, "500": {"description": "the first broken one"}}}},
    "/metrics": {"get": {"summary": "Prometheus text exposition", "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}}}},
    "/v1/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3"}}}}
  }
})json";
  return kDoc;
}

}  // namespace estuary
