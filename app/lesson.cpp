#include "app/lesson.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>

namespace kvs::app {

namespace {
// An optional non-negative integer field in [lo, hi]; false and an error naming it otherwise.
bool get_int(const QJsonObject& o, const char* key, int lo, int hi, int* out, const QString& where, QString* error) {
    if (!o.contains(key)) return true;
    const QJsonValue v = o.value(key);
    if (!v.isDouble() || v.toDouble() != static_cast<double>(v.toInt()) || v.toInt() < lo || v.toInt() > hi) {
        *error = QString("%1.%2 must be an integer in %3..%4").arg(where, key).arg(lo).arg(hi);
        return false;
    }
    *out = v.toInt();
    return true;
}

// inject.text and inject.spec.
bool parse_injection_extras(const QJsonObject& inj, const QString& where, LessonInjection* out, QString* error) {
    if (inj.contains("text")) {
        out->text = inj.value("text").toString();
        if (out->text.isEmpty()) {
            *error = where + ".text must be a non-empty string";
            return false;
        }
    }
    if (inj.contains("adapter")) {
        out->adapter = inj.value("adapter").toString();
        if (out->adapter.isEmpty()) {
            *error = where + ".adapter must name one of the lesson's adapters";
            return false;
        }
    }
    if (!inj.contains("spec")) return true;
    const QJsonObject spec = inj.value("spec").toObject();
    const QString proposer = spec.value("proposer").toString();
    if (proposer != "ngram" && proposer != "layer-skip" && proposer != "int4") {
        *error =
            QString("%1.spec.proposer must be \"ngram\", \"layer-skip\" or \"int4\", not \"%2\"").arg(where, proposer);
        return false;
    }
    out->speculative = proposer;
    return get_int(spec, "k", 1, 8, &out->specK, where + ".spec", error);
}
bool parse_views(const QJsonObject& o, QStringList* out, QString* error) {
    static const QStringList known = {"kv_blocks", "batch_slots", "draft_acceptance", "metrics", "roofline"};
    const QJsonArray views = o.value("views").toArray();
    for (int i = 0; i < views.size(); ++i) {
        const QString v = views[i].toString();
        if (!known.contains(v)) {
            *error = QString("views[%1] must be one of %2, not \"%3\"").arg(i).arg(known.join(", "), v);
            return false;
        }
        out->push_back(v);
    }
    return true;
}

bool parse_events(const QJsonObject& o, QVector<LessonEvent>* out, QString* error) {
    const QJsonArray events = o.value("events").toArray();
    if (events.isEmpty()) {
        *error = "events is missing or empty";
        return false;
    }
    for (int i = 0; i < events.size(); ++i) {
        const QJsonObject ev = events[i].toObject();
        const QString where = QString("events[%1]").arg(i);
        if (ev.contains("caption")) {
            *error = where + ".caption: captions go in \"captions\", each with the conditions (\"when\") it claims";
            return false;
        }
        LessonEvent le;
        if (!get_int(ev, "at_step", 0, 1 << 20, &le.atStep, where, error)) return false;
        const QJsonObject inj = ev.value("inject").toObject();
        const QString iw = where + ".inject";
        if (!get_int(inj, "n", 0, 256, &le.inject.n, iw, error) ||
            !get_int(inj, "prompt", 1, 4096, &le.inject.prompt, iw, error) ||
            !get_int(inj, "output", 1, 4096, &le.inject.output, iw, error) ||
            !get_int(inj, "priority", -100, 100, &le.inject.priority, iw, error) ||
            !get_int(inj, "shared_prefix", 0, 4096, &le.inject.sharedPrefix, iw, error))
            return false;
        if (!parse_injection_extras(inj, iw, &le.inject, error)) return false;
        if (le.inject.n == 0) {
            *error = where + " injects no requests (inject.n is missing or 0)";
            return false;
        }
        out->push_back(le);
    }
    return true;
}

// "adapters": [{"name", "path"}]; every inject.adapter must be one of them.
bool parse_adapters(const QJsonObject& o, Lesson* l, QString* error) {
    const QJsonValue v = o.value("adapters");
    if (!v.isUndefined() && !v.isArray()) {
        *error = "adapters must be a list of {\"name\", \"path\"}";
        return false;
    }
    const QJsonArray a = v.toArray();
    QStringList names;
    for (int i = 0; i < a.size(); ++i) {
        const QJsonObject x = a[i].toObject();
        LessonAdapter la{x.value("name").toString(), x.value("path").toString()};
        if (la.name.isEmpty() || la.path.isEmpty() || names.contains(la.name)) {
            *error = QString("adapters[%1] needs a name of its own and a path").arg(i);
            return false;
        }
        names << la.name;
        l->adapters.push_back(la);
    }
    for (int i = 0; i < l->events.size(); ++i) {
        const QString& name = l->events[i].inject.adapter;
        if (!name.isEmpty() && l->events[i].inject.text.isEmpty()) {
            *error = QString("events[%1].inject.adapter needs inject.text (adapters run chat requests)").arg(i);
            return false;
        }
        if (!name.isEmpty() && !names.contains(name)) {
            *error = QString("events[%1].inject.adapter \"%2\" is not one of the lesson's adapters (%3)")
                         .arg(i)
                         .arg(name, names.isEmpty() ? QString("none") : names.join(", "));
            return false;
        }
    }
    return true;
}

bool parse_captions(const QJsonObject& o, QVector<LessonCaption>* out, QString* error) {
    const QJsonArray captions = o.value("captions").toArray();
    if (captions.isEmpty()) {
        *error = "captions is missing or empty";
        return false;
    }
    for (int i = 0; i < captions.size(); ++i) {
        const QJsonObject c = captions[i].toObject();
        const QString where = QString("captions[%1]").arg(i);
        LessonCaption lc;
        lc.text = c.value("text").toString();
        if (lc.text.isEmpty()) {
            *error = where + ".text must be a non-empty string";
            return false;
        }
        if (const QString bad = unknown_placeholder(lc.text); !bad.isEmpty()) {
            *error = QString("%1.text: {%2} is not a fact (known: %3)").arg(where, bad, lesson_fact_names().join(", "));
            return false;
        }
        const QJsonArray when = c.value("when").toArray();
        if (when.isEmpty()) {
            *error = where + ".when must list the conditions the caption claims";
            return false;
        }
        for (int j = 0; j < when.size(); ++j) {
            LessonCondition cond;
            QString e;
            if (!parse_lesson_condition(when[j].toString(), &cond, &e)) {
                *error = QString("%1.when[%2]: %3").arg(where).arg(j).arg(e);
                return false;
            }
            lc.when.push_back(cond);
        }
        out->push_back(lc);
    }
    return true;
}
}  // namespace

bool parse_lesson(const QByteArray& json, Lesson* out, QString* error) {
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &pe);
    if (pe.error != QJsonParseError::NoError || !doc.isObject()) {
        *error = QString("not a JSON object (%1 at byte %2)").arg(pe.errorString()).arg(pe.offset);
        return false;
    }
    const QJsonObject o = doc.object();
    Lesson l;
    l.title = o.value("title").toString();
    if (l.title.isEmpty()) {
        *error = "title is missing";
        return false;
    }
    l.description = o.value("description").toString();
    const QJsonObject e = o.value("engine").toObject();
    EngineSettings& s = l.engine;
    if (!get_int(e, "kv_blocks", 1, 1 << 20, &s.kvBlocks, "engine", error) ||
        !get_int(e, "max_seqs", 1, 256, &s.maxSeqs, "engine", error) ||
        !get_int(e, "step_budget", 1, 1 << 16, &s.stepBudget, "engine", error) ||
        !get_int(e, "block_size", 8, 32, &s.blockSize, "engine", error))
        return false;
    if (s.blockSize != 8 && s.blockSize != 16 && s.blockSize != 32) {
        *error = "engine.block_size must be 8, 16 or 32";
        return false;
    }
    const QString policy = e.value("policy").toString("continuous");
    if (policy != "continuous" && policy != "static") {
        *error = QString("engine.policy must be \"continuous\" or \"static\", not \"%1\"").arg(policy);
        return false;
    }
    s.staticBatching = policy == "static";
    const QString pre = e.value("preemption").toString("recompute");
    if (pre != "recompute" && pre != "swap") {
        *error = QString("engine.preemption must be \"recompute\" or \"swap\", not \"%1\"").arg(pre);
        return false;
    }
    s.swap = pre == "swap";
    s.prefixCaching = e.value("prefix_caching").toBool(true);
    if (!parse_views(o, &l.views, error) || !parse_events(o, &l.events, error) ||
        !parse_captions(o, &l.captions, error) || !parse_adapters(o, &l, error))
        return false;
    std::stable_sort(l.events.begin(), l.events.end(),
                     [](const LessonEvent& a, const LessonEvent& b) { return a.atStep < b.atStep; });
    *out = l;
    return true;
}

QString demo_adapter_dir() {
    const QString env = qEnvironmentVariable("KVSCOPE_DEMO_ADAPTERS");
    if (!env.isEmpty()) return env;
    const QString installed = QCoreApplication::applicationDirPath() + "/../share/kvscope/adapters";
    if (QDir(installed).exists()) return QDir(installed).canonicalPath();
#ifdef KVSCOPE_SOURCE_ADAPTER_DIR
    return QStringLiteral(KVSCOPE_SOURCE_ADAPTER_DIR);
#else
    return installed;
#endif
}

QString demo_adapter_path(const QString& path) { return QDir(demo_adapter_dir()).filePath(path); }

QStringList builtin_lessons() { return QDir(":/lessons").entryList({"*.json"}, QDir::Files, QDir::Name); }

bool load_builtin_lesson(const QString& name, Lesson* out, QString* error) {
    QFile f(":/lessons/" + name);
    if (!f.open(QIODevice::ReadOnly)) {
        *error = QString("no built-in lesson %1").arg(name);
        return false;
    }
    if (!parse_lesson(f.readAll(), out, error)) {
        *error = name + ": " + *error;
        return false;
    }
    return true;
}

}  // namespace kvs::app
