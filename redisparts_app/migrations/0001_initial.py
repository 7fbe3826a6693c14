# ruff: noqa: RUF012  (the migration framework reads these class attributes)
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="RedisParts",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "Redis parts",
                "verbose_name_plural": "Redis parts",
                "managed": False,
                "default_permissions": ("view", "change"),
            },
        ),
    ]
