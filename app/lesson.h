#pragma once
// Scripted lessons (resources/lessons/*.json, built into the program as Qt resources
// under :/lessons): an engine configuration, events that inject requests at given engine
// steps, and captions that follow the engine: each is shown once every condition it lists
// holds in the frame the views draw (app/lesson_condition.h), in order, at most one new
// caption per frame. The window plays a lesson paused, so the user walks through it with
// Step (or Resume, or slow motion); End lesson gives the engine back its earlier settings.
//
// Format: {"title", "description",
//          "views": ["kv_blocks", "batch_slots", "draft_acceptance", "metrics", "roofline"],
//          "engine": {"kv_blocks", "max_seqs", "step_budget", "block_size", "policy":
//                     "continuous"|"static", "preemption": "recompute"|"swap", "prefix_caching"},
//          "adapters": [{"name", "path"}],
//          "events": [{"at_step", "inject": {"n", "prompt", "output", "priority",
//                                            "shared_prefix", "text", "spec": {"proposer", "k"},
//                                            "adapter"}}],
//          "captions": [{"when": ["shared_blocks >= 6", ...], "text": "... {shared_blocks} ..."}]}
// inject.text: n greedy chat requests with this user message (instead of random tokens);
// inject.spec: speculative decoding for the injected requests, proposer "ngram" (prompt
// lookup), "layer-skip" or "int4" (ChatSettings::speculative), k 1..8.
// views: the docks the lesson talks about, shown and raised when it starts.
// adapters: LoRA adapters the lesson loads into the model's session when it starts (one
// already loaded under the name is used as it is); path is relative to demo_adapter_dir().
// inject.adapter: the injected requests run with that one of them.
#include <QString>
#include <QStringList>
#include <QVector>

#include "app/lesson_condition.h"

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
    QString adapter;  // a LoRA adapter of the lesson's "adapters" ("": the base model)
};

struct LessonAdapter {
    QString name;
    QString path;  // relative to demo_adapter_dir() (or absolute)
};

struct LessonEvent {
    int atStep = 0;
    LessonInjection inject;
};

struct LessonCaption {
    QVector<LessonCondition> when;  // all must hold in the frame on screen
    QString text;                   // {fact} placeholders take the frame's numbers
};

struct Lesson {
    QString title;
    QString description;
    EngineSettings engine;
    QStringList views;                // "kv_blocks", "batch_slots", "draft_acceptance", "metrics"
    QVector<LessonEvent> events;      // by at_step (stable)
    QVector<LessonCaption> captions;  // in the order they are shown
    QVector<LessonAdapter> adapters;  // loaded when the lesson starts
};

// Where the demo LoRA adapters are (tests/tools/train_lora.py made them for the default model,
// SmolLM2-135M-Instruct): $KVSCOPE_DEMO_ADAPTERS when set, else share/kvscope/adapters beside
// the installed program, else the source tree's tests/data. The adapter at `path` there.
QString demo_adapter_dir();
QString demo_adapter_path(const QString& path);

// Parses a lesson; false and *error naming the field when it is not one.
bool parse_lesson(const QByteArray& json, Lesson* out, QString* error);
// The lessons built into the program, by file name.
QStringList builtin_lessons();
bool load_builtin_lesson(const QString& name, Lesson* out, QString* error);

}  // namespace kvs::app
