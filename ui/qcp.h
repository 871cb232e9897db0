#pragma once
// QCustomPlot's header says `signals` and `foreach`; KV Scope builds with QT_NO_KEYWORDS,
// so the words are mapped to their Q_ forms around the include. Include this, never
// <qcustomplot.h> directly.
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef signals
#undef foreach
