#pragma once
// Generated token ids -> text safe to show, for one request: hides control tokens,
// holds back split UTF-8 characters and a possible stop-string prefix, and reports an
// end-of-generation token or a stop string (not before min_new_tokens tokens, as vLLM's
// min_tokens: the engine masks end-of-generation logits until then, and a stop string
// completed earlier is plain text). Shared by generate() and the batching Engine.
#include <cstdint>
#include <string>

#include "engine/sampling/sampling_params.h"
#include "engine/sampling/stop_matcher.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8_stream.h"

namespace kvs {

struct TextStep {
    std::string text;      // newly safe to show (may be empty)
    bool eog = false;      // an end-of-generation token (and ignore_eos is off): its text is not shown
    bool stopped = false;  // a stop string matched: text ends before it
};

class TextStream {
public:
    TextStream(const Tokenizer* tok, const SamplingParams& params)
        : m_tok(tok), m_ignore_eos(params.ignore_eos), m_min_new(params.min_new_tokens), m_stops(params.stop) {}

    TextStep push(int32_t id) {
        TextStep s;
        ++m_pushed;
        if (!m_tok) return s;  // no tokenizer: ids only
        if (m_tok->is_eog(id) && !m_ignore_eos) {
            s.eog = true;
            return s;
        }
        // Control tokens (<|im_start|>, ...) are structure, not text: they are not shown.
        const std::string piece = m_tok->is_control(id) ? std::string() : m_utf8.push(m_tok->token_to_piece(id));
        const auto m = m_stops.push(piece, m_pushed >= m_min_new);
        s.text = m.emit;
        s.stopped = m.stopped;
        return s;
    }
    // The held-back rest once generation ends without a stop string. An incomplete UTF-8
    // character (generation cut by max_tokens between its bytes) is not text: it is dropped,
    // never shown or saved as U+FFFD.
    std::string flush() {
        m_utf8.reset();
        return m_stops.stopped() ? std::string() : m_stops.flush();
    }

private:
    const Tokenizer* m_tok;
    bool m_ignore_eos;
    int m_min_new;     // stop strings count from this many tokens on
    int m_pushed = 0;  // tokens pushed so far
    Utf8Stream m_utf8;
    StopMatcher m_stops;
};

}  // namespace kvs
