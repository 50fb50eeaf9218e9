#include "routes/web_ui_route.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "k3/fnv1a.h"
#include "wire/error.h"
#include "web_assets.h"

namespace k3::server {

namespace {

// FNV-1a of an embedded file, as a strong ETag (computed once per file).
std::string etag_of(const WebAsset& asset) {
    const uint64_t h = Fnv1a().add(asset.begin, size_t(asset.end - asset.begin)).value();
    char buf[24];
    std::snprintf(buf, sizeof buf, "\"%016llx\"", (unsigned long long)h);
    return buf;
}

}  // namespace

// The UI's files. Its own files are revalidated on every load (no-cache + ETag, so a new
// build is picked up at once); the Debian libraries under vendor/ may be kept for a day.
// Content-Security-Policy: only this origin's scripts, styles, fonts and connections, no inline
// script or style, no frames, no plugins.
void answer_web_ui(const DaemonConfig& config, const HttpRequest& req, HttpResponse& res) {
    std::string name = req.path == "/" ? "index.html" : req.path.substr(1);
    const WebAsset* asset = find_web_asset(name);
    if (!asset) throw not_found_error("no such file");
    static const std::map<std::string, std::string> etags = [] {
        std::map<std::string, std::string> m;
        for (const WebAsset& a : kWebAssets) m[a.name] = etag_of(a);
        return m;
    }();
    bool vendor = name.rfind("vendor/", 0) == 0;
    res.add_header("X-Content-Type-Options", "nosniff");
    res.add_header("Referrer-Policy", "no-referrer");
    res.add_header("Cache-Control", vendor ? "public, max-age=86400" : "no-cache");
    res.add_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
                   "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    if (name == "index.html") res.add_header("X-Frame-Options", "DENY");
    if (!config.web_dir.empty() && !vendor) {
        // --web-dir (UI development): only the UI's own files, never an arbitrary path.
        std::ifstream in(config.web_dir + "/" + name, std::ios::binary);
        if (!in) throw not_found_error("web-dir: cannot read " + name);
        std::stringstream ss;
        ss << in.rdbuf();
        res.set_content(ss.str(), asset->content_type);
        return;
    }
    const std::string& etag = etags.at(name);
    res.add_header("ETag", etag);
    if (req.header("If-None-Match") == etag) {
        res.status = 304;
        return;
    }
    res.set_content(reinterpret_cast<const char*>(asset->begin), asset->size(), asset->content_type);
}

}  // namespace k3::server
