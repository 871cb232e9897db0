#include "app/lesson_player.h"

#include "app/engine_bridge.h"

namespace kvs::app {

LessonPlayer::LessonPlayer(EngineBridge* bridge, QObject* parent) : QObject(parent), m_bridge(bridge) {}

bool LessonPlayer::play(const QString& name, QString* error) {
    Lesson l;
    if (!load_builtin_lesson(name, &l, error)) return false;
    m_lesson = l;
    m_next = 0;
    m_started = false;
    m_caption = tr("<b>%1</b><br>%2").arg(l.title.toHtmlEscaped(), l.description.toHtmlEscaped());
    Q_EMIT captionChanged(m_caption);
    EngineBridge* bridge = m_bridge;  // configureEngine runs on the bridge's thread
    auto configure = [bridge, engine = l.engine] { bridge->configureEngine(engine); };
    QMetaObject::invokeMethod(bridge, configure, Qt::QueuedConnection);
    return true;
}

QVector<qint64> LessonPlayer::injectSynthetic(int n, int promptLen, int outputLen, int priority, int sharedPrefix,
                                              const QString& speculative, int specK) {
    const auto ids =
        m_bridge->injectSynthetic(n, promptLen, outputLen, priority, m_injectSeed++, sharedPrefix, speculative, specK);
    for (qint64 id : ids) Q_EMIT requestInjected(id, tr("synthetic %1").arg(id));
    if (ids.isEmpty()) Q_EMIT nothingInjected(tr("No model is loaded: nothing injected"));
    return ids;
}

void LessonPlayer::engineConfigured() {
    m_lastStep = -1;
    m_idleAt = -1;
    if (m_next < 0 || m_started) return;
    m_started = true;
    m_bridge->pause();
    Q_EMIT pausedEngine();
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
    for (int j = m_next; j < m_lesson.events.size(); ++j) {
        if (m_lesson.events[j].inject.n == 0) continue;
        m_idleAt = m_lastStep;
        runEvents(m_lesson.events[j].atStep);
        return;
    }
}

// Runs the lesson's events due at this step: requests to inject, the caption to show.
void LessonPlayer::runEvents(qint64 step) {
    if (m_next < 0 || !m_started) return;
    while (m_next < m_lesson.events.size() && m_lesson.events[m_next].atStep <= step) {
        const LessonEvent& e = m_lesson.events[m_next++];
        const LessonInjection& in = e.inject;
        for (int i = 0; i < in.n && !in.text.isEmpty(); ++i) {
            const qint64 id = m_bridge->injectText(in.text, in.output, in.priority, in.speculative, in.specK);
            if (id > 0) Q_EMIT requestInjected(id, tr("lesson %1").arg(id));
        }
        if (in.n > 0 && in.text.isEmpty())
            injectSynthetic(in.n, in.prompt, in.output, in.priority, in.sharedPrefix, in.speculative, in.specK);
        if (!e.caption.isEmpty()) {
            m_caption = tr("<b>%1</b> · step %2<br>%3")
                            .arg(m_lesson.title.toHtmlEscaped())
                            .arg(step)
                            .arg(e.caption.toHtmlEscaped());
            Q_EMIT captionChanged(m_caption);
        }
    }
    if (m_next >= m_lesson.events.size()) m_next = -1;  // all events ran
}

}  // namespace kvs::app
