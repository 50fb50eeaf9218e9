// What every engine subcommand (make-model, inspect, verify, run, tokenize, detokenize,
// pack-trunk, diskbench) does around its own work, written once: -h/--help anywhere prints the
// usage on stdout and exits 0; the body walks its arguments with an ArgList; a k3::Error (a bad
// argument included) is printed as "k3serve NAME: message" on stderr, followed by the usage
// after a usage error, and becomes the exit code of its kind (README, "Exit codes"); any other
// exception is exit 1. Engine log lines go to stderr, so stdout carries only the output.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace k3::cli {

// The arguments after the subcommand name, walked one at a time:
//   for (ArgList args(argc, argv); args.next();)
//       if (args.is("--gen")) gen = args.integer(); else if ... else args.positional(&dir);
class ArgList {
public:
    ArgList(int argc, char** argv) : argc_(argc), argv_(argv) {}

    bool next() { return ++i_ < argc_; }
    const std::string& arg() const { return arg_ = argv_[i_]; }
    bool is(std::string_view flag) const { return flag == argv_[i_]; }

    // The current flag's value (the next argument); a usage error when there is none.
    const char* value();
    // The value as a non-negative integer at most `max`, or as a non-negative number.
    long long integer(long long max = 1'000'000'000);
    double number();

    // Takes the current argument as the next of the positional arguments `slots` (a usage error
    // for an unknown option or one argument too many).
    void positional(std::initializer_list<std::string*> slots);

private:
    int argc_;
    char** argv_;
    int i_ = 0;
    mutable std::string arg_;
};

struct Subcommand {
    const char* name;                     // "verify"
    std::string usage;                    // the --help text
    const char* after_failure = nullptr;  // a line printed after a failure other than usage
};

int run_subcommand(const Subcommand& command, int argc, char** argv, const std::function<int(ArgList&)>& body);

}  // namespace k3::cli
