#include "routes/info_routes.h"

#include <cstdlib>
#include <ctime>

#include "wire/generation_request.h"
#include "routes/route_reply.h"
#include "routes/status.h"

namespace k3::server {

void InfoRoutes::health(const HttpRequest& req, HttpResponse& res) {
    switch (state_.phase.load()) {
        case Phase::Ready: {
            if (std::string problem = state_.liveness ? state_.liveness->problem() : ""; !problem.empty()) {
                bool model = problem.rfind("model", 0) == 0;
                send_error(req, res, ApiError(503, "unavailable_error", model ? "model_unhealthy" : "worker_stuck", "", problem));
                return;
            }
            // Serving while the routed experts load: ok, and how far they are. A piece that
            // failed to load makes the model unhealthy (requests needing it fail).
            const WeightsLoad w = state_.weights_load();
            if (w.failures > 0) {
                send_error(req, res, ApiError(503, "unavailable_error", "model_unhealthy", "",
                                         "model weights failed to load: " + w.first_failure));
                return;
            }
            if (!w.complete()) {
                send_json(res, 200, {{"status", "ok"},
                                     {"weights", "loading"},
                                     {"weights_loaded_bytes", w.loaded_bytes},
                                     {"weights_total_bytes", w.total_bytes}});
                return;
            }
            send_json(res, 200, {{"status", "ok"}});
            return;
        }
        case Phase::Loading:
            send_error(req, res, loading_error(state_.status()));
            return;
        case Phase::Draining:
            send_error(req, res, shutting_down_error());
            return;
        case Phase::Failed:
            send_error(req, res, model_failed_error(state_.status()));
            return;
    }
}

void InfoRoutes::models(HttpResponse& res) {
    json model = {{"id", state_.limits.model_name},
                  {"object", "model"},
                  {"created", state_.start_time},
                  {"owned_by", "k3serve"},
                  {"max_model_len", state_.limits.n_ctx},
                  {"meta",
                   {{"n_vocab", state_.info.n_vocab},
                    {"n_ctx_max", state_.info.n_ctx_max},
                    {"shape", state_.info.shape},
                    {"fingerprint", state_.info.fingerprint}}}};
    // Anthropic's model object and list fields too (the Anthropic SDK's models.list reads
    // them; OpenAI's schema allows the extra keys), so one route serves both SDKs.
    char created_at[32];
    std::time_t start = std::time_t(state_.start_time);
    std::strftime(created_at, sizeof created_at, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&start));
    model["type"] = "model";
    model["display_name"] = state_.limits.model_name;
    model["created_at"] = created_at;
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}, {"has_more", false},
                         {"first_id", state_.limits.model_name}, {"last_id", state_.limits.model_name}});
}

// GET /v1/models/{id} (the SDK's models.retrieve).
void InfoRoutes::model(const HttpRequest& req, HttpResponse& res) {
    std::string id = req.path.substr(std::string("/v1/models/").size());
    if (id != state_.limits.model_name && (state_.limits.strict_model_name || id.empty()))
        throw ApiError(404, "not_found_error", "model_not_found", "model",
                       "The model '" + id + "' does not exist; this server serves '" + state_.limits.model_name + "'");
    models(res);
    json one = json::parse(res.body)["data"][0];
    one["id"] = one["display_name"] = id;  // any name is served by the loaded model (--strict-model-name: only its own)
    res.body = dump(one);
}

void InfoRoutes::props(HttpResponse& res) {
    json j = {{"model",
               {{"id", state_.limits.model_name},
                {"name", state_.info.name},
                {"shape", state_.info.shape},
                {"n_vocab", state_.info.n_vocab},
                {"n_ctx_max", state_.info.n_ctx_max},
                {"bos_token_id", state_.info.bos_token_id},
                {"eos_token_id", state_.info.eos_token_id},
                {"kv_bytes_per_position", state_.info.kv_bytes_per_position},
                {"fingerprint", state_.info.fingerprint}}},
              {"kernels", state_.info.kernels},
              {"memory_plan", state_.info.memory_plan},
              {"n_ctx", state_.limits.n_ctx},
              {"max_prompt_tokens", state_.limits.max_prompt_tokens},
              {"total_slots", config().parallel},
              {"queue_capacity", state_.queue.capacity()},
              {"config", config().to_json()},
              {"build", K3_VERSION},
              {"default_generation_settings",
               {{"temperature", 1.0}, {"top_p", 1.0}, {"completions_max_tokens", 16},
                {"chat_max_tokens", "rest of the context"}, {"thinking", true}}}};
    send_json(res, 200, j);
}

void InfoRoutes::status(const HttpRequest& req, HttpResponse& res) {
    uint64_t since = 0;
    if (req.has_param("since")) {
        const std::string v = req.param("since");
        char* end = nullptr;
        since = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0') throw bad_request("since", "'since' must be a non-negative integer");
    }
    res.add_header("Cache-Control", "no-store");
    send_json(res, 200, status_json(state_, since));
}

}  // namespace k3::server
