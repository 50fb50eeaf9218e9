# Writes OUT, a header holding the text of IN as `kKimiK3Config` (a raw string literal).
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from ${IN} at build time: the real Kimi K3 config.json.\n#pragma once\n\ninline constexpr const char kKimiK3Config[] = R\"k3config(${text})k3config\";\n")
