from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views
from .ratelimits import login_rate_limited

# The demo's name in the admin's header and title, instead of Django's.
admin.site.site_header = "Marketplace: Redis parts"
admin.site.site_title = "Marketplace admin"
admin.site.index_title = "Administration"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", login_rate_limited(views.login), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("market/", views.market, name="market"),
    path("market/buy/", views.market_buy, name="market_buy"),
    path("market/sell/", views.market_list, name="market_list"),
    path("market/cancel/", views.market_cancel, name="market_cancel"),
    path("market/open/", views.market_join, name="market_join"),
    path("outbox/", views.outbox, name="outbox"),
    path("friends/", views.friends, name="friends"),
    path("friends/add/", views.friend_add, name="friend_add"),
    path("friends/remove/", views.friend_remove, name="friend_remove"),
    path("stats/", views.stats, name="stats"),
    # The admin's login counts against the same limit as the site's.
    path("admin/login/", login_rate_limited(admin.site.login)),
    path("admin/", admin.site.urls),
    # /metrics and /health/: staff or REDISPARTS["METRICS_TOKEN"] only.
    path("", include("redisparts_app.monitoring.urls")),
    path("", include("marketplace.social.urls")),
]
