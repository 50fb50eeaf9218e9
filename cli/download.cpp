// `k3serve download REPO DEST [--revision R]`: fetches a Hugging Face model repository into
// DEST and proves every byte. The file list, each file's size and its hash (sha256 for LFS
// files, the git blob id for small ones) come from the repository's metadata for one pinned
// commit, so a branch that moves during the download cannot mix two revisions. Files already
// present and matching are kept; partial files are resumed with byte ranges; a file whose hash
// does not match is fetched again (up to --retries times). Free space is checked first, progress
// is shown on stderr, and `verify` runs on the result. The token (HF_TOKEN, --token-file or the
// Hugging Face CLI's token file) is sent only to the endpoint's host and never printed.
// Exit status: 0 complete and verified; 1 a transfer failed or a file never matched its hash;
// 2 usage, an unknown repository or revision, a refused token, or a checkpoint `verify` refused;
// 3 not enough free space.
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <curl/curl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/subcommand.h"
#include "k3/cli.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

std::string usage() {
    return
                 "usage: k3serve download REPO DEST [options]\n"
                 "\n"
                 "Downloads the Hugging Face model repository REPO (e.g. moonshotai/Kimi-K3) into DEST:\n"
                 "resumable, every file checked against the size and hash the repository publishes for\n"
                 "a pinned revision, only missing or bad files fetched again, then 'k3serve verify DEST'.\n"
                 "\n"
                 "  --revision R      branch, tag or commit (default main); pinned to its commit\n"
                 "  --endpoint URL    hub address (default $HF_ENDPOINT or https://huggingface.co)\n"
                 "  --token-file F    file holding the access token (default: $HF_TOKEN, then\n"
                 "                    ~/.cache/huggingface/token); the token is never printed\n"
                 "  --include GLOB    only files matching GLOB (repeatable; e.g. '*.json')\n"
                 "  --retries N       attempts per file (default 4)\n"
                 "  --no-verify       skip 'k3serve verify' at the end\n"
                 "  --quiet           no progress lines\n"
                 "\n"
                 "Exit status: 0 done and verified; 1 transfer or hash failure; 2 usage, unknown\n"
                 "repository or revision, refused token, or verify refused the checkpoint; 3 not enough space.\n";
}

// ---- hashing (OpenSSL's EVP) ----

class Hasher {
public:
    explicit Hasher(const EVP_MD* md) : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
        if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), md, nullptr) != 1) throw Error(ErrorKind::Runtime, "EVP_DigestInit failed");
    }
    void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
    std::string hex() {
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(ctx_.get(), out, &n);
        static const char* digits = "0123456789abcdef";
        std::string s;
        for (unsigned i = 0; i < n; ++i) s += digits[out[i] >> 4], s += digits[out[i] & 15];
        return s;
    }

private:
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// What the repository says a file is.
struct RemoteFile {
    std::string name;
    int64_t size = 0;
    std::string sha256;   // LFS files
    std::string blob_id;  // git blob sha1 ("blob <size>\0" + content): small files
};

// The file's hash the way the repository states it; "" when the file cannot be read.
std::string local_hash(const std::filesystem::path& p, const RemoteFile& f) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return "";
    Hasher h(f.sha256.empty() ? EVP_sha1() : EVP_sha256());
    if (f.sha256.empty()) {
        std::string header = "blob " + std::to_string(f.size);
        h.update(header.data(), header.size() + 1);  // with the NUL
    }
    std::vector<char> buf(size_t(4) << 20);
    while (in) {
        in.read(buf.data(), std::streamsize(buf.size()));
        if (in.gcount() > 0) h.update(buf.data(), size_t(in.gcount()));
    }
    return h.hex();
}

bool matches(const std::filesystem::path& p, const RemoteFile& f) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec) || int64_t(std::filesystem::file_size(p, ec)) != f.size) return false;
    return local_hash(p, f) == (f.sha256.empty() ? f.blob_id : f.sha256);
}

// ---- HTTP through libcurl ----

struct Progress {
    bool quiet = false;
    int64_t total = 0;       // bytes this run has to fetch
    int64_t done = 0;        // fetched so far by this run, finished files
    int64_t current = 0;     // of the file in flight
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last;
    std::string file;

    void show(bool final = false) {
        if (quiet) return;
        auto now = std::chrono::steady_clock::now();
        if (!final && now - last < std::chrono::milliseconds(500)) return;
        last = now;
        double secs = std::chrono::duration<double>(now - start).count();
        double got = double(done + current);
        double rate = secs > 0 ? got / secs : 0;
        double left = rate > 0 ? (double(total) - got) / rate : 0;
        std::fprintf(stderr, "\r%-32.32s %8.2f / %.2f GB  %7.1f MB/s  %5.0f s left   ", file.c_str(), got / 1e9,
                     double(total) / 1e9, rate / 1e6, left);
        if (final) std::fputc('\n', stderr);
        std::fflush(stderr);
    }
};

class Http {
public:
    Http(std::string token) : token_(std::move(token)) {}

    struct Response {
        long status = 0;
        std::string body;
        std::string error;  // transport failure, "" when an HTTP status came back
    };

    Response get(const std::string& url) {
        Response r;
        auto curl = handle(url);
        curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, &append_to_string);
        curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &r.body);
        perform(curl.get(), r);
        return r;
    }

    // Appends to `out` from byte `offset` on (a range request when offset > 0). Returns the
    // status; a 200 to a range request means the server sent the whole file, so the caller
    // truncates and starts over.
    Response fetch_to(const std::string& url, const std::filesystem::path& out, int64_t offset, Progress& progress) {
        Response r;
        auto curl = handle(url);
        FileSink sink;
        sink.path = out;
        sink.offset = offset;
        sink.curl = curl.get();
        sink.progress = &progress;
        curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, &write_to_file);
        curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &sink);
        std::string range;
        if (offset > 0) {
            range = std::to_string(offset) + "-";
            curl_easy_setopt(curl.get(), CURLOPT_RANGE, range.c_str());
        }
        perform(curl.get(), r);
        if (sink.file && std::fclose(sink.file) != 0 && r.error.empty())
            r.error = "cannot write " + out.string() + ": " + std::strerror(errno);
        return r;
    }

private:
    using Handle = std::unique_ptr<CURL, void (*)(CURL*)>;

    static size_t append_to_string(char* p, size_t s, size_t n, void* user) {
        static_cast<std::string*>(user)->append(p, s * n);
        return s * n;
    }

    // Where a file transfer's bytes go: opened on the first byte, once the status is known.
    struct FileSink {
        std::FILE* file = nullptr;
        std::filesystem::path path;
        int64_t offset = 0;
        CURL* curl = nullptr;
        bool opened = false;
        Progress* progress = nullptr;
    };

    static size_t write_to_file(char* p, size_t s, size_t n, void* user) {
        auto* k = static_cast<FileSink*>(user);
        if (!k->opened) {
            long status = 0;
            curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &status);
            if (status != 200 && status != 206) return 0;  // an error page is not file data
            // A 200 to a range request: the whole file is coming, so start it again.
            const bool append = status == 206 && k->offset > 0;
            k->file = std::fopen(k->path.c_str(), append ? "ab" : "wb");
            if (!k->file) return 0;
            if (!append) k->progress->current -= k->offset, k->offset = 0;
            k->opened = true;
        }
        size_t w = std::fwrite(p, 1, s * n, k->file);
        k->progress->current += int64_t(w);
        k->progress->show();
        return w;
    }

    Handle handle(const std::string& url) {
        Handle h(curl_easy_init(), curl_easy_cleanup);
        if (!h) throw Error(ErrorKind::Runtime, "curl_easy_init failed");
        curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
        curl_easy_setopt(h.get(), CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h.get(), CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(h.get(), CURLOPT_USERAGENT, "k3serve/" K3_VERSION);
        curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT, 30L);
        // A transfer that stalls below 1 KB/s for a minute is dropped and resumed.
        curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_LIMIT, 1024L);
        curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
        if (!token_.empty()) {
            // Bearer auth is sent to the first host only, never to a redirect's (LFS CDN) host.
            curl_easy_setopt(h.get(), CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
            curl_easy_setopt(h.get(), CURLOPT_XOAUTH2_BEARER, token_.c_str());
        }
        return h;
    }

    static void perform(CURL* curl, Response& r) {
        char err[CURL_ERROR_SIZE] = {};
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
        CURLcode rc = curl_easy_perform(curl);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
        if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && r.status != 200 && r.status != 206))
            r.error = err[0] ? err : curl_easy_strerror(rc);
    }

    std::string token_;
};

std::string read_token(const std::string& token_file) {
    std::string path = token_file;
    if (path.empty()) {
        if (const char* t = std::getenv("HF_TOKEN"); t && *t) return t;
        if (const char* home = std::getenv("HOME")) path = std::string(home) + "/.cache/huggingface/token";
        if (path.empty() || !std::filesystem::exists(path)) return "";
    }
    std::ifstream in(path);
    if (!in) throw Error(ErrorKind::Usage, "cannot read the token file " + path);
    std::string t;
    std::getline(in, t);
    while (!t.empty() && std::isspace((unsigned char)t.back())) t.pop_back();
    return t;
}

// Percent-encodes one path segment (file names may hold spaces and the like).
std::string url_path(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || std::strchr("-._~/", c)) out += char(c);
        else {
            char b[4];
            std::snprintf(b, sizeof b, "%%%02X", c);
            out += b;
        }
    }
    return out;
}

// fnmatch-style '*' and '?' only.
bool glob_match(const char* g, const char* s) {
    if (!*g) return !*s;
    if (*g == '*') return glob_match(g + 1, s) || (*s && glob_match(g, s + 1));
    return *s && (*g == '?' || *g == *s) && glob_match(g + 1, s + 1);
}

std::string api_error(const Http::Response& r) {
    try {
        auto j = nlohmann::json::parse(r.body);
        if (j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
    } catch (...) {
    }
    return r.body.substr(0, 200);
}

struct DownloadOptions {
    std::string repo, dest, revision = "main", token_file, endpoint;
    std::vector<std::string> include;
    int retries = 4;
    bool verify = true, quiet = false;
};

// The files of the repository at the revision, pinned to its commit: the hub's metadata route
// gives each file's size and its sha256 (LFS) or git blob id.
std::vector<RemoteFile> list_files(Http& http, const DownloadOptions& o, std::string& commit) {
    auto meta = http.get(o.endpoint + "/api/models/" + url_path(o.repo) + "/revision/" + url_path(o.revision) + "?blobs=true");
    if (!meta.error.empty()) throw Error(ErrorKind::Io, "cannot reach " + o.endpoint + ": " + meta.error);
    if (meta.status == 401 || meta.status == 403)
        throw Error(ErrorKind::Usage, "the hub refused access to " + o.repo + " (HTTP " + std::to_string(meta.status) +
                                          "): set HF_TOKEN or --token-file to a token that may read it");
    if (meta.status == 404)
        throw Error(ErrorKind::Usage, "no revision '" + o.revision + "' in repository " + o.repo + " (" + api_error(meta) + ")");
    if (meta.status != 200)
        throw Error(ErrorKind::Io, "the hub answered HTTP " + std::to_string(meta.status) + " for " + o.repo + ": " + api_error(meta));
    std::vector<RemoteFile> files;
    try {
        auto info = nlohmann::json::parse(meta.body);
        commit = info.at("sha").get<std::string>();
        for (const auto& s : info.at("siblings")) {
            RemoteFile f;
            f.name = s.at("rfilename").get<std::string>();
            if (f.name.empty() || f.name[0] == '/' || f.name.find("..") != std::string::npos)
                throw Error(ErrorKind::Io, "the repository lists an unsafe file name '" + f.name + "'");
            if (s.contains("lfs") && s["lfs"].is_object()) {
                f.sha256 = s["lfs"].at("sha256").get<std::string>();
                f.size = s["lfs"].at("size").get<int64_t>();
            } else {
                f.blob_id = s.at("blobId").get<std::string>();
                f.size = s.at("size").get<int64_t>();
            }
            bool wanted = o.include.empty();
            for (const auto& g : o.include) wanted |= glob_match(g.c_str(), f.name.c_str());
            if (wanted) files.push_back(std::move(f));
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::Io, "the hub's file list for " + o.repo + " has no size or hash where expected (" +
                                       std::string(e.what()) + "); pass --revision with a commit of a model repository");
    }
    if (files.empty()) throw Error(ErrorKind::Usage, "no files to download from " + o.repo + " at " + o.revision);
    return files;
}

int64_t file_size_or_zero(const std::filesystem::path& p) {
    std::error_code ec;
    auto n = std::filesystem::file_size(p, ec);
    return ec ? 0 : int64_t(n);
}

// Fetches one file into DEST/NAME.part (resuming what is there), checks it and moves it into
// place. Returns "" when it matches, else why the last attempt failed.
std::string fetch_file(Http& http, const DownloadOptions& o, const std::string& commit, const RemoteFile& f,
                       Progress& progress) {
    const std::filesystem::path dest(o.dest);
    const auto final_path = dest / f.name;
    const auto part = dest / (f.name + ".part");
    std::filesystem::create_directories(final_path.parent_path());
    // A file here with the wrong bytes (truncated, or another revision's) is resumed from when it
    // is shorter than the remote one, and dropped otherwise.
    std::error_code ec;
    if (std::filesystem::exists(final_path, ec) && !std::filesystem::exists(part, ec)) {
        if (file_size_or_zero(final_path) < f.size) std::filesystem::rename(final_path, part);
        else std::filesystem::remove(final_path);
    }
    const std::string url = o.endpoint + "/" + url_path(o.repo) + "/resolve/" + commit + "/" + url_path(f.name);
    progress.file = f.name;
    std::string why;
    for (int attempt = 1; attempt <= o.retries; ++attempt) {
        int64_t have = file_size_or_zero(part);
        if (have > f.size) std::filesystem::remove(part), have = 0;
        progress.current = have;
        if (have < f.size) {
            auto r = http.fetch_to(url, part, have, progress);
            if (r.status == 401 || r.status == 403)
                throw Error(ErrorKind::Usage, "the hub refused " + f.name + " (HTTP " + std::to_string(r.status) + ")");
            if (r.status == 416) {  // our part is not a prefix of theirs
                std::filesystem::remove(part);
                why = "range not satisfiable";
                continue;
            }
            if (!r.error.empty() || (r.status != 200 && r.status != 206)) {
                why = r.error.empty() ? "HTTP " + std::to_string(r.status) : r.error;
                if (!progress.quiet) std::fputc('\n', stderr);
                std::fprintf(stderr, "download: %s: %s (attempt %d of %d, resuming)\n", f.name.c_str(), why.c_str(), attempt,
                             o.retries);
                std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
                continue;
            }
        }
        if (matches(part, f)) {
            std::filesystem::rename(part, final_path);
            return "";
        }
        why = "its bytes do not match the repository's " + std::string(f.sha256.empty() ? "git blob id" : "sha256");
        if (!progress.quiet) std::fputc('\n', stderr);
        std::fprintf(stderr, "download: %s: %s; fetching it again (attempt %d of %d)\n", f.name.c_str(), why.c_str(), attempt,
                     o.retries);
        std::filesystem::remove(part);
    }
    return why.empty() ? "no attempt succeeded" : why;
}

int download(const DownloadOptions& o) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Http http(read_token(o.token_file));
    std::string commit;
    const std::vector<RemoteFile> files = list_files(http, o, commit);
    const std::filesystem::path dest(o.dest);
    std::filesystem::create_directories(dest);
    std::fprintf(stderr, "download: %s at %s (commit %s): %zu files\n", o.repo.c_str(), o.revision.c_str(), commit.c_str(),
                 files.size());

    // What is already here, and what the rest needs on disk.
    Progress progress;
    progress.quiet = o.quiet;
    std::vector<const RemoteFile*> todo;
    for (const auto& f : files) {
        if (matches(dest / f.name, f)) continue;
        todo.push_back(&f);
        progress.total += f.size - std::min(file_size_or_zero(dest / (f.name + ".part")), f.size);
    }
    std::fprintf(stderr, "download: %zu files present and verified, %zu to fetch (%.2f GB)\n", files.size() - todo.size(),
                 todo.size(), double(progress.total) / 1e9);
    struct statvfs sv {};
    if (progress.total > 0 && ::statvfs(dest.c_str(), &sv) == 0) {
        const int64_t free_bytes = int64_t(sv.f_bavail) * int64_t(sv.f_frsize);
        if (free_bytes < progress.total) {
            std::fprintf(stderr, "k3serve download: %s has %.2f GB free and the download needs %.2f GB more\n", dest.c_str(),
                         double(free_bytes) / 1e9, double(progress.total) / 1e9);
            return kExitMachineLacks;
        }
    }

    for (const RemoteFile* f : todo) {
        const std::string why = fetch_file(http, o, commit, *f, progress);
        progress.done += progress.current;
        progress.current = 0;
        if (!why.empty()) {
            progress.show(true);
            std::fprintf(stderr, "k3serve download: %s failed after %d attempts: %s\n", f->name.c_str(), o.retries, why.c_str());
            return 1;
        }
    }
    progress.show(true);
    std::fprintf(stderr, "download: all %zu files match commit %s\n", files.size(), commit.c_str());
    std::ofstream(dest / ".k3serve-download.json")
        << nlohmann::json{{"repo", o.repo}, {"revision", o.revision}, {"commit", commit}, {"endpoint", o.endpoint}}.dump(2)
        << "\n";
    if (!o.verify || !std::filesystem::exists(dest / "config.json")) return 0;
    std::string dir = dest.string();
    char verb[] = "verify";
    char* args[] = {verb, dir.data(), nullptr};
    return verify_main(2, args);
}

}  // namespace

int download_main(int argc, char** argv) {
    return run_subcommand({"download", usage()}, argc, argv, [](ArgList& args) {
        DownloadOptions o;
        o.endpoint = std::getenv("HF_ENDPOINT") ? std::getenv("HF_ENDPOINT") : "https://huggingface.co";
        while (args.next()) {
            if (args.is("--revision")) o.revision = args.value();
            else if (args.is("--endpoint")) o.endpoint = args.value();
            else if (args.is("--token-file")) o.token_file = args.value();
            else if (args.is("--include")) o.include.push_back(args.value());
            else if (args.is("--retries")) o.retries = int(args.integer(100));
            else if (args.is("--no-verify")) o.verify = false;
            else if (args.is("--quiet")) o.quiet = true;
            else args.positional({&o.repo, &o.dest});
        }
        if (o.repo.empty() || o.dest.empty()) throw Error(ErrorKind::Usage, "REPO and DEST are required");
        if (o.repo.find('/') == std::string::npos || o.repo.find("..") != std::string::npos)
            throw Error(ErrorKind::Usage, "REPO must be OWNER/NAME, got '" + o.repo + "'");
        if (o.retries < 1) throw Error(ErrorKind::Usage, "--retries must be 1..100");
        while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
        return download(o);
    });
}

}  // namespace k3::cli
