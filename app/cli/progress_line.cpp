#include "app/cli/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>

namespace kvs::app {

namespace {

constexpr int kBarWidth = 20;
constexpr auto kTtyInterval = std::chrono::milliseconds(100);
constexpr auto kPlainInterval = std::chrono::seconds(1);

// One flag for the process: a signal handler can only reach static storage.
CancelFlag g_sigint_flag{false};
struct sigaction g_previous {};
int g_installed = 0;  // SigintCancel objects alive (nested commands share the one handler)

void on_sigint(int) {
    g_sigint_flag.store(true);
    // The next Ctrl+C ends the process: the work may be stuck in a long step.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, nullptr);
}

}  // namespace

ProgressLine::ProgressLine(std::string title, std::FILE* out, bool tty)
    : m_title(std::move(title)), m_out(out), m_tty(tty), m_start(std::chrono::steady_clock::now()) {}

ProgressLine::ProgressLine(std::string title, std::FILE* out)
    : ProgressLine(std::move(title), out, isatty(fileno(out))) {}

ProgressLine::~ProgressLine() { finish(); }

Progress ProgressLine::progress(const CancelFlag* cancel) {
    return Progress([this](const std::string& stage, double f) { on_report(stage, f); }, cancel);
}

void ProgressLine::finish() {
    if (m_open) std::fputc('\n', m_out);
    m_open = false;
    std::fflush(m_out);
}

std::string ProgressLine::render(const std::string& stage, double fraction, bool bar) const {
    const double f = std::clamp(fraction, 0.0, 1.0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    std::string s = m_title + "  ";
    if (bar) {
        const int filled = int(std::floor(f * kBarWidth));
        s += "[" + std::string(size_t(filled), '#') + std::string(size_t(kBarWidth - filled), '.') + "]  ";
    }
    char pct[64];
    std::snprintf(pct, sizeof pct, "%3d%%", int(std::floor(f * 100.0)));
    s += pct;
    if (!stage.empty()) s += "  " + stage;
    char t[64];
    std::snprintf(t, sizeof t, "  (%.0f s)", secs);
    s += t;
    return s;
}

void ProgressLine::on_report(const std::string& stage, double fraction) {
    const auto now = std::chrono::steady_clock::now();
    const bool last = fraction >= 1.0;
    if (last && m_done) return;
    if (m_tty) {
        if (!last && m_wrote_any && now - m_last_write < kTtyInterval) return;
        std::fprintf(m_out, "\r%s\x1b[K", render(stage, fraction, true).c_str());
        m_open = true;
        if (last) finish();
    } else {
        const bool new_stage = stage != m_last_stage;
        if (!last && (!new_stage || (m_wrote_any && now - m_last_write < kPlainInterval))) return;
        std::fprintf(m_out, "%s\n", render(stage, fraction, false).c_str());
        std::fflush(m_out);
    }
    m_done = last;
    m_wrote_any = true;
    m_last_write = now;
    m_last_stage = stage;
}

SigintCancel::SigintCancel() {
    if (g_installed++ > 0) return;
    g_sigint_flag.store(false);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_previous);
}

SigintCancel::~SigintCancel() {
    if (--g_installed > 0) return;
    sigaction(SIGINT, &g_previous, nullptr);
}

const CancelFlag* SigintCancel::flag() const { return &g_sigint_flag; }

bool SigintCancel::cancelled() const { return g_sigint_flag.load(); }

}  // namespace kvs::app
