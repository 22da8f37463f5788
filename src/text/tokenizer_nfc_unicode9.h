// Hugging Face normalizes with unicode-normalization-alignments 0.1.12, whose tables are Unicode
// 9.0.0. A character assigned later is, for it, a plain starter that NFC leaves alone, while
// utf8proc (Unicode 15) may reorder or compose it. Canonical data of characters that Unicode 9
// already had never changes (Unicode's normalization stability), so NFC matches HF when every
// character outside Unicode 9's normalization data is treated as inert.
#pragma once

namespace stave::tok {

// True when HF's Unicode 9.0 normalization tables mention `cp` (a combining class, a canonical
// decomposition, or a composition), or it is Hangul (composed by arithmetic).
bool hf_nfc_knows(char32_t cp);

}  // namespace stave::tok
