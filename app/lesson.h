#pragma once
// Scripted lessons (resources/lessons/*.json, built into the program as Qt resources
// under :/lessons): an engine configuration and a list of events, each at an engine step,
// that inject synthetic requests and show a caption. The window plays one paused, so the
// user walks through it with Step (or Resume, or slow motion).
//
// Format: {"title", "description",
//          "engine": {"kv_blocks", "max_seqs", "step_budget", "block_size", "policy":
//                     "continuous"|"static", "preemption": "recompute"|"swap", "prefix_caching"},
//          "events": [{"at_step", "caption", "inject": {"n", "prompt", "output",
//                                                       "priority", "shared_prefix",
//                                                       "text", "spec": {"proposer", "k"}}}]}
// inject.text: n greedy chat requests with this user message (instead of random tokens);
// inject.spec: speculative decoding for the injected requests, proposer "ngram" (prompt
// lookup), "layer-skip" or "int4" (ChatSettings::speculative), k 1..8.
#include <QString>
#include <QStringList>
#include <QVector>

namespace kvs::app {

// How the engine is set up (EngineBridge::configureEngine); 0 = the default.
struct EngineSettings {
    int kvBlocks = 0;  // 0: 512 MiB of KV, at most 4096 blocks
    int maxSeqs = 64;
    int stepBudget = 512;
    int blockSize = 16;
    bool staticBatching = false;
    bool swap = false;  // preemption by swap (else recompute)
    bool prefixCaching = true;
};

struct LessonInjection {
    int n = 0;        // requests (0: none)
    int prompt = 16;  // each request's own prompt tokens
    int output = 16;  // tokens each generates
    int priority = 0;
    int sharedPrefix = 0;  // tokens every request of the lesson starts with
    QString text;          // non-empty: a chat request with this user message
    QString speculative;   // "" (off), "ngram", "layer-skip", "int4"
    int specK = 4;
};

struct LessonEvent {
    int atStep = 0;
    QString caption;
    LessonInjection inject;
};

struct Lesson {
    QString title;
    QString description;
    EngineSettings engine;
    QVector<LessonEvent> events;  // by at_step (stable)
};

// Parses a lesson; false and *error naming the field when it is not one.
bool parse_lesson(const QByteArray& json, Lesson* out, QString* error);
// The lessons built into the program, by file name.
QStringList builtin_lessons();
bool load_builtin_lesson(const QString& name, Lesson* out, QString* error);

}  // namespace kvs::app
