// k3serve_fake_daemon: the real HTTP layer and engine worker over the FakeEngine, as a process,
// for the Node.js tests (openai SDK protocol checks and the headless-browser UI test) that must
// not depend on a model. Prints "listening on http://127.0.0.1:PORT" and serves until stdin
// closes or SIGTERM. With --record-prompts FILE, every prompt the engine is given is appended to
// FILE as one JSON string per line (specials spelled out), for tests to assert on.
//   k3serve_fake_daemon [--api-key KEY] [--token-delay-ms N] [--answer TEXT] [--xtml TEXT] [--reasoning TEXT]
//                       [--alias NAME] [--loading] [--record-prompts FILE] [--web-dir DIR]
// --xtml scripts the raw output after the generation prompt, control tokens spelled out (e.g. a
// tool call: "<|close|>response<|sep|><|open|>tools<|sep|>...<|end_of_msg|>").
// With thinking on (a request that says nothing of it), the answer or --xtml comes after
// --reasoning TEXT (default "Let me think."), the think channel closed and the response opened,
// as K3 answers; --reasoning "" answers every prompt with the script alone.
// --loading keeps the daemon in its loading phase (status "loading weights 40%") until a line
// "loaded" arrives on stdin, for the UI's loading state: the test says when loading ends, so
// what it sees while loading does not depend on how fast the browser starts.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "server_harness.h"

using namespace k3::test;

int main(int argc, char** argv) {
    auto config = test_config();
    config.sse_ping_s = 1;
    FakeEngineOptions options;
    std::string answer = "Hello from the fake engine!";
    std::string xtml;
    options.reasoning = "Let me think.";
    bool loading = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--api-key" && i + 1 < argc) {
            config.api_keys = {argv[++i]};
        } else if (a == "--token-delay-ms" && i + 1 < argc) {
            options.token_delay = std::chrono::milliseconds(std::atoi(argv[++i]));
        } else if (a == "--alias" && i + 1 < argc) {
            config.model_alias = argv[++i];
        } else if (a == "--web-dir" && i + 1 < argc) {
            config.web_dir = argv[++i];
        } else if (a == "--loading") {
            loading = true;
        } else if (a == "--answer" && i + 1 < argc) {
            answer = argv[++i];
        } else if (a == "--xtml" && i + 1 < argc) {
            xtml = argv[++i];
        } else if (a == "--reasoning" && i + 1 < argc) {
            options.reasoning = argv[++i];
        } else if (a == "--record-prompts" && i + 1 < argc) {
            options.on_prompt = [path = std::string(argv[++i])](const std::vector<int32_t>& ids) {
                const std::string text = FakeTokenizer().decode(ids);
                std::ofstream(path, std::ios::app) << json(text).dump(-1, ' ', false, json::error_handler_t::replace)
                                                   << "\n";
            };
        } else {
            std::fprintf(stderr, "usage: k3serve_fake_daemon [--api-key KEY] [--token-delay-ms N] [--answer TEXT] "
                                 "[--xtml TEXT] [--reasoning TEXT] [--alias NAME] [--loading] [--record-prompts FILE] "
                                 "[--web-dir DIR]\n");
            return 2;
        }
    }
    options.script = xtml.empty() ? chat_answer(answer) : FakeTokenizer().encode(xtml, /*allow_special=*/true);
    options.n_ctx_max = 4096;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    TestServer server(config, options, !loading);
    if (loading) server.state.set_status("loading weights 40%");
    std::printf("listening on http://127.0.0.1:%d\n", server.port);
    std::fflush(stdout);
    std::thread([&server] {
        std::string line;
        while (std::getline(std::cin, line)) {
            if (line == "loaded" && server.state.phase.load() == Phase::Loading) {
                server.state.set_status("ready");
                server.state.phase = Phase::Ready;
            }
        }
        kill(getpid(), SIGTERM);
    }).detach();
    int sig = 0;
    sigwait(&set, &sig);
    return 0;
}
