from django.urls import path

from . import events, views

app_name = "social"

urlpatterns = [
    path("guild/", views.guild_page, name="guild"),
    path("guild/join/", views.guild_join, name="guild_join"),
    path("guild/leave/", views.guild_leave, name="guild_leave"),
    path("guild/members/", views.guild_members, name="guild_members"),
    path("contacts/suggest/", views.suggest_recipients, name="suggest"),
    path("mail/", views.mail_inbox, name="inbox"),
    path("mail/compose/", views.mail_compose, name="compose"),
    path("mail/<int:message_id>/", views.mail_read, name="read"),
    path("mail/<int:message_id>/delete/", views.mail_delete, name="delete"),
    path("chat/", views.chat_list, name="chats"),
    path("chat/new/", views.chat_create, name="chat_create"),
    path("chat/<str:chat_id>/", views.chat_room, name="chat"),
    path("chat/<str:chat_id>/send/", views.chat_send, name="chat_send"),
    path("chat/<str:chat_id>/poll/", views.chat_poll, name="chat_poll"),
    path("chat/<str:chat_id>/events/", events.chat_events, name="chat_events"),
    path("chat/<str:chat_id>/older/", views.chat_older, name="chat_older"),
    path("chat/<str:chat_id>/add/", views.chat_add_member, name="chat_add"),
    path("chat/<str:chat_id>/leave/", views.chat_leave, name="chat_leave"),
]
