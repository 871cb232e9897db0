#pragma once
// Plays a scripted lesson (app/lesson.h) against the engine bridge: a fresh engine with the
// lesson's settings, paused; then, as the engine's steps go by, each event's requests are
// injected before its step runs and its caption is shown. Also the synthetic load of the
// Engine dock's Inject button, which lessons use too.
#include <QObject>
#include <QString>
#include <QVector>

#include "app/lesson.h"
#include "ui/view_types.h"

namespace kvs::app {

class EngineBridge;

class LessonPlayer : public QObject {
    Q_OBJECT
public:
    explicit LessonPlayer(EngineBridge* bridge, QObject* parent = nullptr);

    // Loads the built-in lesson and asks the bridge for its engine; the lesson starts once
    // engineConfigured() is called. False with *error when it does not load.
    bool play(const QString& name, QString* error);
    QString caption() const { return m_caption; }  // rich text; empty before any lesson
    // n synthetic requests (EngineBridge::injectSynthetic), each seeded differently.
    QVector<qint64> injectSynthetic(int n, int promptLen, int outputLen, int priority, int sharedPrefix = 0,
                                    const QString& speculative = {}, int specK = 4);

    // The window calls these as the engine reports:
    void engineConfigured();         // a fresh engine runs: a lesson waiting for it starts
    void stepsRan(qint64 lastStep);  // new steps up to lastStep: events of the next one go in
    // No new step since the last poll; newest is the last step the engine ran.
    void idle(const ui::StepPoint& newest);

Q_SIGNALS:
    void captionChanged(const QString& html);
    void pausedEngine();  // the lesson paused the engine (the Pause button should show it)
    void requestInjected(qint64 id, const QString& label);
    void nothingInjected(const QString& why);

private:
    void runEvents(qint64 step);

    EngineBridge* m_bridge;
    Lesson m_lesson;
    int m_next = -1;         // its events from m_next on are still to come; -1: no lesson
    bool m_started = false;  // its engine is configured
    qint64 m_lastStep = -1;  // the newest step of the current engine
    qint64 m_idleAt = -1;    // the step after which idle() last ran events
    QString m_caption;
    quint64 m_injectSeed = 1;
};

}  // namespace kvs::app
