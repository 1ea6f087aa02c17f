// The chat page `tessera serve` answers at `/`: one self-contained HTML file
// (no CDN: the machines have no internet) that streams answers from
// /v1/chat/completions, stops them, keeps conversations in the browser's
// localStorage, and shows the plan (GET /props) and tok/s.
#pragma once

#include <string_view>

namespace tessera {

std::string_view web_page();

}  // namespace tessera
