"""Files shared in Slack threads as context for the model (issue 27, part 1).

`download`: the one guarded way to fetch a Slack file (the bot token goes to Slack's file
host only, sizes capped while streaming). `kinds`: what a file is, by its bytes. `extract`:
text out of text-like files and PDFs. `store`: each file read once, by Slack file id and
content hash, with its audience. `shared`: which files a turn reads and the messages they
become. `parts`: images as image parts of a model request, and `VISION`.

A lower layer: it never imports the Slack surface (`bot.slack`).
"""
