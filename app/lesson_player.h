#pragma once
// Plays a scripted lesson (app/lesson.h) against the engine bridge: a fresh engine with the
// lesson's settings, paused; then, as the engine's steps go by, each event's requests are
// injected before its step runs. Captions follow the frames the views draw: the window
// hands every frame it shows to frameShown(), and the next caption appears once all its
// conditions hold there (app/lesson_condition.h), with its numbers from that frame. End
// gives the engine back the settings it had before the lesson. Also the synthetic load of
// the Engine dock's Inject button, which lessons use too.
#include <QElapsedTimer>
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
    // Ends the lesson: the engine gets the settings it had before the lesson started (its
    // requests are dropped), the caption goes. Nothing happens when no lesson plays.
    void end();
    bool active() const { return m_active; }
    const Lesson& lesson() const { return m_lesson; }
    QString caption() const { return m_caption; }  // rich text; empty when no lesson plays
    int captionIndex() const { return m_shown; }   // the caption on screen; -1: the description
    // n synthetic requests (EngineBridge::injectSynthetic), each seeded differently.
    QVector<qint64> injectSynthetic(int n, int promptLen, int outputLen, int priority, int sharedPrefix = 0,
                                    const QString& speculative = {}, int specK = 4);

    // The window calls these as the engine reports:
    void engineConfigured();         // a fresh engine runs: a lesson waiting for it starts
    void stepsRan(qint64 lastStep);  // new steps up to lastStep: events of the next one go in
    // No new step since the last poll; newest is the last step the engine ran.
    void idle(const ui::StepPoint& newest);
    // The frames the views now draw: the next caption appears when its conditions hold in them.
    void frameShown(const ui::EngineFrame& frame, const ui::SpecFrame& spec);

Q_SIGNALS:
    void captionChanged(const QString& html);
    // Caption `index` of the lesson appeared with the frame of engine step `step`.
    void captionShown(int index, qint64 step);
    void started();       // the lesson's engine runs, paused
    void ended();         // End: the earlier settings are asked for, the caption is gone
    void pausedEngine();  // the lesson paused the engine (the Pause button should show it)
    void requestInjected(qint64 id, const QString& label);
    void nothingInjected(const QString& why);

private:
    void runEvents(qint64 step);
    void showCaption(const ui::EngineFrame& frame, const ui::SpecFrame& spec);

    EngineBridge* m_bridge;
    Lesson m_lesson;
    EngineSettings m_before;                    // the engine's settings when the lesson started
    bool m_active = false;                      // between play() and end()
    int m_next = -1;                            // its events from m_next on are still to come; -1: none
    bool m_started = false;                     // its engine is configured
    qint64 m_lastStep = -1;                     // the newest step of the current engine
    qint64 m_idleAt = -1;                       // the step after which idle() last ran events
    int m_shown = -1;                           // the caption on screen
    QPair<qint64, qint64> m_shownWith{-2, -2};  // (engine step, spec step) of the frame it appeared with
    QElapsedTimer m_shownAt;                    // when it appeared (pacing captions on an idle frame)
    QString m_caption;
    quint64 m_injectSeed = 1;
};

}  // namespace kvs::app
