"""The leaderboard's views as data: the tables the app shows and ``harness export`` writes.

Each ``build_*`` function turns query results (``leaderboards.queries``) into a typed view with
a numeric frame whose columns follow ``leaderboards.schema``. Nothing here touches Streamlit.

Intervals (95%). A metric whose every value is 0 or 1 gets Wilson score intervals per dataset
(``scipy.stats.binomtest(...).proportion_ci(method="wilson")``): a percentile bootstrap of 0 of 3
is [0, 0], Wilson's is [0, 56.1]. An average of D such datasets gets a stratified Agresti-Coull
interval: Agresti & Coull's (1998) two added successes and two added failures, spread evenly over
the datasets (2/D of each per dataset), variances summed with weight 1/D^2, clipped to [0, 1].
Spread, the total adjustment is the single-sample one; added per dataset, it would pull the centre
so far that the interval could miss its own score (four datasets at 4 of 4: 100 with [60, 90]).
Any other metric gets the percentile
bootstrap over per-question values (:func:`harness.metrics.bootstrap.bootstrap_ci`, seed 0); an
average's bootstrap resamples the pooled questions with each question weighted ``N / (D * n_d)``,
so that every dataset counts equally, as in the point estimate. An average column is the
unweighted mean of its datasets' means (as the papers' "Avg."), and only for rows that have every
dataset of the column: averages never span different dataset sets.

One module per page (``common`` is shared); this package re-exports every name, so
``from leaderboards import views`` and ``views.<name>`` keep working."""

from leaderboards.views.common import *  # noqa: F403
from leaderboards.views.cost import *  # noqa: F403
from leaderboards.views.glossary import *  # noqa: F403
from leaderboards.views.leaderboard import *  # noqa: F403
from leaderboards.views.reported import *  # noqa: F403
from leaderboards.views.training import *  # noqa: F403
from leaderboards.views.trajectories import *  # noqa: F403
