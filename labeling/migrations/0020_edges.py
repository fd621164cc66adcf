from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    # The database cache table of the "shared" cache (the token endpoint's throttle counters,
    # labeling/settings.py); createcachetable skips caches that are not database caches.
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("labeling", "0019_label_loop_indexes")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
