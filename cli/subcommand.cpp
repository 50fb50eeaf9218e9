// The subcommand skeleton (subcommand.h).
#include "cli/subcommand.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "k3/error.h"

namespace k3::cli {

const char* ArgList::value() {
    if (i_ + 1 >= argc_) throw Error(ErrorKind::Usage, std::string(argv_[i_]) + " needs a value");
    return argv_[++i_];
}

long long ArgList::integer(long long max) {
    const std::string flag = argv_[i_];
    const char* v = value();
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > max)
        throw Error(ErrorKind::Usage, flag + " expects an integer from 0 to " + std::to_string(max) + ", got '" + v + "'");
    return n;
}

double ArgList::number() {
    const std::string flag = argv_[i_];
    const char* v = value();
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v, &end);
    if (errno || end == v || *end || !(x >= 0) || x > 1e12)
        throw Error(ErrorKind::Usage, flag + " expects a non-negative number, got '" + v + "'");
    return x;
}

void ArgList::positional(std::initializer_list<std::string*> slots) {
    const std::string a = argv_[i_];
    if (!a.empty() && a[0] == '-') throw Error(ErrorKind::Usage, "unknown option '" + a + "'");
    for (std::string* slot : slots)
        if (slot->empty()) {
            *slot = a;
            return;
        }
    throw Error(ErrorKind::Usage, "unexpected argument '" + a + "'");
}

int run_subcommand(const Subcommand& command, int argc, char** argv, const std::function<int(ArgList&)>& body) {
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::fputs(command.usage.c_str(), stdout);
            return 0;
        }
    // The engine logs through spdlog's default logger (the daemon points it at its JSON log);
    // a subcommand keeps stdout for its output.
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("k3serve", std::make_shared<spdlog::sinks::stderr_sink_mt>()));
    spdlog::set_pattern(std::string("k3serve ") + command.name + ": %v");
    try {
        ArgList args(argc, argv);
        return body(args);
    } catch (const Error& e) {
        std::fprintf(stderr, "k3serve %s: %s\n", command.name, e.what());
        if (e.kind() == ErrorKind::Usage) std::fprintf(stderr, "\n%s", command.usage.c_str());
        else if (command.after_failure) std::fprintf(stderr, "%s\n", command.after_failure);
        return exit_code_for(e.kind());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "k3serve %s: %s\n", command.name, e.what());
        if (command.after_failure) std::fprintf(stderr, "%s\n", command.after_failure);
        return 1;
    }
}

}  // namespace k3::cli
