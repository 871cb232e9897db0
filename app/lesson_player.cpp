#include "app/lesson_player.h"

#include "app/engine_bridge.h"
#include "app/lesson_condition.h"

namespace kvs::app {

LessonPlayer::LessonPlayer(EngineBridge* bridge, QObject* parent) : QObject(parent), m_bridge(bridge) {}

bool LessonPlayer::play(const QString& name, QString* error) {
    Lesson l;
    if (!load_builtin_lesson(name, &l, error)) return false;
    for (const LessonAdapter& a : l.adapters) {  // before anything changes: a lesson that cannot run starts not
        bool loaded = false;
        for (const AdapterEntry& e : m_bridge->adapters()) loaded |= e.name == a.name;
        if (loaded) continue;
        const QString path = demo_adapter_path(a.path);
        if (const QString why = m_bridge->loadAdapter(a.name, path); !why.isEmpty()) {
            *error = tr("%1 needs the LoRA adapter '%2' (%3), made for SmolLM2-135M-Instruct: %4")
                         .arg(l.title, a.name, path, why);
            return false;
        }
    }
    if (!m_active) m_before = m_bridge->engineSettings();  // a lesson after a lesson keeps the first's
    m_lesson = l;
    m_active = true;
    m_next = 0;
    m_started = false;
    m_shown = -1;
    m_shownWith = {-2, -2};
    m_caption = tr("<b>%1</b><br>%2").arg(l.title.toHtmlEscaped(), l.description.toHtmlEscaped());
    Q_EMIT captionChanged(m_caption);
    EngineBridge* bridge = m_bridge;  // configureEngine runs on the bridge's thread
    auto configure = [bridge, engine = l.engine] { bridge->configureEngine(engine); };
    QMetaObject::invokeMethod(bridge, configure, Qt::QueuedConnection);
    return true;
}

void LessonPlayer::end() {
    if (!m_active) return;
    m_active = false;
    m_next = -1;
    m_started = false;
    m_shown = -1;
    m_caption.clear();
    Q_EMIT captionChanged(m_caption);
    EngineBridge* bridge = m_bridge;
    auto configure = [bridge, engine = m_before] { bridge->configureEngine(engine); };
    QMetaObject::invokeMethod(bridge, configure, Qt::QueuedConnection);
    Q_EMIT ended();
}

QVector<qint64> LessonPlayer::injectSynthetic(int n, int promptLen, int outputLen, int priority, int sharedPrefix,
                                              const QString& speculative, int specK) {
    const auto ids =
        m_bridge->injectSynthetic(n, promptLen, outputLen, priority, m_injectSeed++, sharedPrefix, speculative, specK);
    for (qint64 id : ids) Q_EMIT requestInjected(id, tr("synthetic #%1").arg(id));
    if (ids.isEmpty()) Q_EMIT nothingInjected(tr("No model is loaded: nothing injected"));
    return ids;
}

void LessonPlayer::engineConfigured() {
    m_lastStep = -1;
    m_idleAt = -1;
    if (!m_active || m_next < 0 || m_started) return;
    m_started = true;
    m_bridge->pause();
    Q_EMIT pausedEngine();
    Q_EMIT started();
    runEvents(0);
}

void LessonPlayer::stepsRan(qint64 lastStep) {
    m_lastStep = lastStep;
    runEvents(lastStep + 1);  // events of the next step go in before it runs
}

// A lesson whose requests all finished before its next injection's step would wait forever
// (an idle engine runs no steps): run the events up to that injection now, once per idle.
void LessonPlayer::idle(const ui::StepPoint& newest) {
    if (m_next < 0 || !m_started || m_lastStep < 0 || m_idleAt == m_lastStep) return;
    if (newest.step != m_lastStep || newest.running > 0 || newest.waiting > 0 || newest.swapped > 0) return;
    if (m_next < m_lesson.events.size()) {
        m_idleAt = m_lastStep;
        runEvents(m_lesson.events[m_next].atStep);
    }
}

// Injects the requests of the lesson's events due at this step.
void LessonPlayer::runEvents(qint64 step) {
    if (m_next < 0 || !m_started) return;
    while (m_next < m_lesson.events.size() && m_lesson.events[m_next].atStep <= step) {
        const LessonInjection& in = m_lesson.events[m_next++].inject;
        for (int i = 0; i < in.n && !in.text.isEmpty(); ++i) {
            const qint64 id =
                m_bridge->injectText(in.text, in.output, in.priority, in.speculative, in.specK, in.adapter);
            if (id > 0) Q_EMIT requestInjected(id, tr("lesson #%1").arg(id));
        }
        if (in.n > 0 && in.text.isEmpty())
            injectSynthetic(in.n, in.prompt, in.output, in.priority, in.sharedPrefix, in.speculative, in.specK);
    }
    if (m_next >= m_lesson.events.size()) m_next = -1;  // all events ran
}

void LessonPlayer::frameShown(const ui::EngineFrame& frame, const ui::SpecFrame& spec) {
    if (!m_active || !m_started || m_lastStep < 0) return;  // no frame of this lesson's engine yet
    const QPair<qint64, qint64> key{frame.step.step, spec.step};
    const int next = m_shown + 1;
    // At most one new caption per frame, so each can be read; when the engine has gone idle on
    // the frame the last caption came with (a lesson run at full speed ends between two polls),
    // the next one whose conditions hold in that same frame follows after a reading pause.
    constexpr qint64 kReadingPauseMs = 1500;
    const bool may_show = key != m_shownWith || (m_shownAt.isValid() && m_shownAt.elapsed() >= kReadingPauseMs);
    if (next < m_lesson.captions.size() && may_show) {
        const LessonFacts facts = lesson_facts(frame, spec);
        bool holds = true;
        for (const LessonCondition& c : m_lesson.captions[next].when) holds = holds && condition_holds(c, facts);
        if (holds) {
            m_shown = next;
            m_shownWith = key;
            m_shownAt.start();
            showCaption(frame, spec);
            Q_EMIT captionShown(m_shown, frame.step.step);
            return;
        }
    }
    if (m_shown >= 0) showCaption(frame, spec);  // its numbers follow the frame on screen
}

void LessonPlayer::showCaption(const ui::EngineFrame& frame, const ui::SpecFrame& spec) {
    const QString text = render_caption(m_lesson.captions[m_shown].text, lesson_facts(frame, spec));
    const QString html = tr("<b>%1</b> · step %2<br>%3")
                             .arg(m_lesson.title.toHtmlEscaped())
                             .arg(frame.step.step)
                             .arg(text.toHtmlEscaped());
    if (html == m_caption) return;
    m_caption = html;
    Q_EMIT captionChanged(m_caption);
}

}  // namespace kvs::app
