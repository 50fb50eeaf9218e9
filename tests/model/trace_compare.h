// Step-by-step comparison of the engine's named intermediates (engine/model/trace.h) with the
// numpy reference's (tests/reference/k3_reference.py --dump-trace), so that a divergence is
// reported as the first step where the two part rather than only as a logits mismatch.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/engine_impl.h"
#include "model/model_test_util.h"
#include "model/trace.h"

namespace k3::test {

// One named intermediate, all its rows (chunks of a prefill appended in order).
struct TraceStep {
    std::string name;
    int64_t width = 0;
    std::vector<float> values;  // [rows][width]
};

// Records every step a forward pass reports, in order.
class TraceRecorder final : public Trace {
public:
    void record(const char* step, int layer, const float* rows, int T, int64_t width) override {
        const std::string name = trace_name(step, layer);
        auto it = index_.find(name);
        if (it == index_.end()) {
            it = index_.emplace(name, steps.size()).first;
            steps.push_back(TraceStep{name, width, {}});
        }
        steps[it->second].values.insert(steps[it->second].values.end(), rows, rows + T * width);
    }
    std::vector<TraceStep> steps;

private:
    std::map<std::string, size_t> index_;
};

// Attaches a recorder to the engine's model for the lifetime of this object.
class AttachedTrace {
public:
    explicit AttachedTrace(Engine& e) : model_(static_cast<EngineImpl&>(e).model()) { model_.trace = &recorder; }
    ~AttachedTrace() { model_.trace = nullptr; }
    TraceRecorder recorder;

private:
    Model& model_;
};

// Runs the reference (float64, as the goldens were made) on `ids` and reads its trace.
// `mutation` (may be empty) injects one of k3_reference.MUTATIONS.
inline std::vector<TraceStep> reference_trace(const std::string& model_dir, const std::vector<int32_t>& ids,
                                              const std::string& scratch, const std::string& mutation = "") {
    namespace fs = std::filesystem;
    fs::create_directories(scratch);
    const std::string out = scratch + "/reference" + (mutation.empty() ? "" : "-" + mutation) + ".trace";
    std::string list;
    for (int32_t id : ids) {
        if (!list.empty()) list += ',';
        list += std::to_string(id);
    }
    const std::string cmd = env_or("K3_PYTHON3", "/usr/bin/python3") + " '" + env_or("K3_SOURCE_DIR", ".") +
                            "/tests/reference/k3_reference.py' '" + model_dir + "' --float64 --ids " + list +
                            " --dump-trace '" + out + "'" + (mutation.empty() ? "" : " --mutate " + mutation) +
                            " > /dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    std::ifstream index(out + ".json");
    const nlohmann::json j = nlohmann::json::parse(index);
    std::ifstream data(out, std::ios::binary);
    std::vector<TraceStep> steps;
    for (const auto& s : j.at("steps")) {
        const std::vector<int64_t> shape = s.at("shape");
        TraceStep step{s.at("name"), shape.at(1), std::vector<float>(size_t(shape.at(0) * shape.at(1)))};
        data.read(reinterpret_cast<char*>(step.values.data()), std::streamsize(step.values.size() * sizeof(float)));
        if (!data) throw std::runtime_error("short reference trace " + out);
        steps.push_back(std::move(step));
    }
    return steps;
}

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The first step (in the engine's order) whose name, shape or values (rel-L2 > tolerance)
// differ from the reference's; "" when every step matches. `worst` receives the largest rel-L2.
inline std::string first_divergence(const std::vector<TraceStep>& engine, const std::vector<TraceStep>& reference,
                                    double tolerance, double* worst = nullptr) {
    if (worst) *worst = 0;
    for (size_t i = 0; i < engine.size() || i < reference.size(); ++i) {
        if (i >= engine.size()) return reference[i].name + " (the engine has no such step)";
        if (i >= reference.size()) return engine[i].name + " (the reference has no such step)";
        const TraceStep &e = engine[i], &r = reference[i];
        if (e.name != r.name) return e.name + " (the reference has " + r.name + " here)";
        if (e.values.size() != r.values.size() || e.width != r.width) return e.name + " (shape differs)";
        const double d = rel_l2(e.values, r.values);
        if (worst) *worst = std::max(*worst, d);
        if (!(d <= tolerance)) {
            char figure[32];
            std::snprintf(figure, sizeof figure, "%.3g", d);
            return e.name + " (rel-L2 " + figure + ")";
        }
    }
    return "";
}

}  // namespace k3::test
